/**
 * The byte quota on files attached from a workspace's `outputs/` (issue 27): per turn
 * (OUTPUT_FILES_MAX_BYTES_PER_TURN) and per tenant over the last 24 hours (OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY,
 * counted from the stored uploads of agent outputs: upload rows referenced by a `tool_file` message file).
 * Measured before: 12 × 5 MiB files in outputs/ copied 50 MB into the api's uploads in one command.
 *
 * Both sides apply it. The api computes what is left when it builds the run request and sends it in the shell
 * layer's `output_quota`; the backend's shell tool counts what it attaches in the run and reports files over it as
 * `not_attached` with the reason, so the model sees why. The api checks again when it copies the files
 * (activities/run-agent/tool-files.ts): that check is the one that holds (concurrent turns of one tenant).
 */
import type { PrismaClient } from '../generated/prisma/client.js';

/** The shell layer's `output_quota`: the caps (for the message) and the bytes this turn may still attach. */
export interface OutputQuotaLimits {
  /** OUTPUT_FILES_MAX_BYTES_PER_TURN. */
  turn_bytes: number;
  /** Bytes this turn's message already attached (a turn continued after ask_human, a retried attempt). */
  turn_used_bytes: number;
  /** OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY. */
  tenant_day_bytes: number;
  /** Bytes the tenant attached in the last 24 hours. */
  tenant_day_used_bytes: number;
}

/** Running count of one turn's attached bytes against its limits. */
export class OutputQuota {
  private used = 0;
  constructor(private readonly limits: OutputQuotaLimits) {}

  /** Null when `size` more bytes fit; else why the file is not attached (shown to the model). */
  refuse(size: number): string | null {
    const l = this.limits;
    const turnLeft = Math.max(0, l.turn_bytes - l.turn_used_bytes - this.used);
    if (size > turnLeft) return `over this turn's quota of output files (${l.turn_bytes} bytes per turn, ${turnLeft} left)`;
    const dayLeft = Math.max(0, l.tenant_day_bytes - l.tenant_day_used_bytes - this.used);
    if (size > dayLeft) return `over the daily quota of output files (${l.tenant_day_bytes} bytes per tenant in 24 hours, ${dayLeft} left)`;
    return null;
  }

  take(size: number): void {
    this.used += size;
  }
}

type Db = Pick<PrismaClient, '$queryRaw'>;

/**
 * Bytes of agent-output uploads already stored: of this message, and of the tenant in the last 24 hours. Uploads
 * whose ids are in `except` are left out (the rows a replayed event would write again: already counted once).
 */
export async function outputBytesUsed(
  db: Db,
  p: { tenantId: string; messageId: string; except?: string[] },
): Promise<{ turn: number; tenantDay: number }> {
  const except = p.except ?? [];
  const [row] = await db.$queryRaw<{ turn: bigint | null; day: bigint | null }[]>`
    SELECT
      COALESCE(SUM(u.size) FILTER (WHERE EXISTS (
        SELECT 1 FROM message_files m WHERE m.upload_file_id = u.id AND m.transfer_method = 'tool_file' AND m.message_id = ${p.messageId}::uuid
      )), 0) AS turn,
      COALESCE(SUM(u.size), 0) AS day
    FROM upload_files u
    WHERE u.tenant_id = ${p.tenantId}::uuid
      AND u.created_at > now() - interval '24 hours'
      AND NOT (u.id = ANY(${except}::uuid[]))
      AND EXISTS (SELECT 1 FROM message_files m WHERE m.upload_file_id = u.id AND m.transfer_method = 'tool_file')`;
  return { turn: Number(row?.turn ?? 0), tenantDay: Number(row?.day ?? 0) };
}

/** The limits a turn starts with (the shell layer's `output_quota`). */
export async function outputQuotaLimits(
  db: Db,
  config: { OUTPUT_FILES_MAX_BYTES_PER_TURN: number; OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY: number },
  p: { tenantId: string; messageId: string; except?: string[] },
): Promise<OutputQuotaLimits> {
  const used = await outputBytesUsed(db, p);
  return {
    turn_bytes: config.OUTPUT_FILES_MAX_BYTES_PER_TURN,
    turn_used_bytes: used.turn,
    tenant_day_bytes: config.OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY,
    tenant_day_used_bytes: used.tenantDay,
  };
}
