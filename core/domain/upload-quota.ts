/**
 * The per-tenant quota on stored uploads (TENANT_MAX_UPLOAD_BYTES; 0 = none): the bytes of the tenant's upload_files
 * rows (every stored upload: POST /v1/files/upload, remote_url files copied at chat time, agent output copies) plus
 * the new file may not go over it. Uploads check it three times: by the declared size before reading the body, by
 * the bytes received while streaming, and finally under a per-tenant advisory lock in the transaction that writes
 * the row, so two concurrent uploads cannot both pass. Refusal: 413 `storage_quota_exceeded`.
 * (Agent output files have their own quota, core/domain/output-quota.ts; they are counted here but never refused here.)
 */
import type { Db } from '../platform/db.js';

export class UploadQuotaExceeded extends Error {
  readonly status = 413;
  readonly code = 'storage_quota_exceeded';
  constructor(
    readonly used: number,
    readonly adding: number,
    readonly max: number,
  ) {
    super(
      `The workspace's uploads would take ${used + adding} bytes (${used} stored); at most ${max} are allowed ` +
        `(TENANT_MAX_UPLOAD_BYTES).`,
    );
  }
}

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** Bytes of the tenant's stored uploads (the (tenant_id) index of upload_files). */
export async function uploadBytesUsed(db: Pick<Db, '$queryRaw'>, tenantId: string): Promise<number> {
  const [row] = await db.$queryRaw<{ bytes: bigint | null }[]>`
    select sum(size)::bigint as bytes from upload_files where tenant_id = ${tenantId}::uuid`;
  return Number(row?.bytes ?? 0);
}

/** Bytes the tenant may still store (Infinity without a limit). */
export async function uploadBytesLeft(db: Pick<Db, '$queryRaw'>, tenantId: string, max: number): Promise<number> {
  if (!max) return Infinity;
  return Math.max(0, max - (await uploadBytesUsed(db, tenantId)));
}

/** Throws UploadQuotaExceeded when `adding` more bytes do not fit (a pre-check; the locked one is `storeUnderQuota`). */
export async function checkUploadQuota(db: Pick<Db, '$queryRaw'>, tenantId: string, max: number, adding: number): Promise<void> {
  if (!max) return;
  const used = await uploadBytesUsed(db, tenantId);
  if (used + adding > max) throw new UploadQuotaExceeded(used, adding, max);
}

/**
 * Runs `store` (moves the file in place, writes its row) in a transaction holding the tenant's upload lock, after
 * counting the stored bytes again: the check that holds against concurrent uploads of one tenant.
 */
export async function storeUnderQuota<T>(db: Db, tenantId: string, max: number, adding: number, store: (tx: Tx) => Promise<T>): Promise<T> {
  return db.$transaction(async (tx) => {
    if (max) {
      await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`upload-quota:${tenantId}`}, 0))`;
      await checkUploadQuota(tx, tenantId, max, adding);
    }
    return store(tx);
  });
}
