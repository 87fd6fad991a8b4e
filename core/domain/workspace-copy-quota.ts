/**
 * The quota on workspace copies (issue 47: forks filled the disk, a full 1 GiB copy per request that no quota counted).
 * One copy may hold at most WORKSPACE_QUOTA_BYTES (what one workspace may hold); a tenant's copies that are still in
 * use (agent_workspaces.copied_bytes of its active workspaces: a deleted fork frees its share) at most
 * TENANT_MAX_WORKSPACE_COPY_BYTES (0 = none). The copy runs within the smaller budget and stops when it goes over it.
 * The transaction that records it counts again under a per-tenant advisory lock, so two concurrent forks cannot both
 * pass. Refusal: 413 `workspace_quota_exceeded`, with nothing copied or kept (api/service/fork.ts).
 */
import type { Db } from '../platform/db.js';

export interface CopyLimits {
  WORKSPACE_QUOTA_BYTES: number;
  TENANT_MAX_WORKSPACE_COPY_BYTES: number;
}

export class WorkspaceCopyRefused extends Error {
  readonly status = 413;
  readonly code = 'workspace_quota_exceeded';
}

type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/** Bytes of the tenant's workspace copies still in use. */
export async function copiedBytesUsed(db: Pick<Db, '$queryRaw'>, tenantId: string): Promise<number> {
  const [row] = await db.$queryRaw<{ bytes: bigint | null }[]>`
    select sum(copied_bytes)::bigint as bytes from agent_workspaces where tenant_id = ${tenantId}::uuid and status = 'active'`;
  return Number(row?.bytes ?? 0);
}

const perCopy = (limits: CopyLimits) =>
  new WorkspaceCopyRefused(
    `The workspace holds more than one workspace may (${limits.WORKSPACE_QUOTA_BYTES} bytes, WORKSPACE_QUOTA_BYTES): it cannot be copied.`,
  );
const perTenant = (limits: CopyLimits, used: number, adding: number | null) =>
  new WorkspaceCopyRefused(
    `The tenant's workspace copies would take ${adding === null ? 'more than' : used + adding} bytes (${used} in use); at most ` +
      `${limits.TENANT_MAX_WORKSPACE_COPY_BYTES} are allowed (TENANT_MAX_WORKSPACE_COPY_BYTES). Delete forked conversations to free some.`,
  );

/**
 * The budget of one copy: the smaller of a workspace's quota and what the tenant has left. Throws WorkspaceCopyRefused
 * when nothing is left. `overBudget` turns a copy that went over the budget into the refusal naming the limit hit.
 */
export async function copyBudget(
  db: Pick<Db, '$queryRaw'>,
  limits: CopyLimits,
  tenantId: string,
): Promise<{ bytes: number; overBudget: () => WorkspaceCopyRefused }> {
  const max = limits.TENANT_MAX_WORKSPACE_COPY_BYTES;
  const used = max ? await copiedBytesUsed(db, tenantId) : 0;
  const left = max ? max - used : Infinity;
  if (left <= 0) throw perTenant(limits, used, null);
  const bytes = Math.min(limits.WORKSPACE_QUOTA_BYTES, left);
  return { bytes, overBudget: () => (bytes < limits.WORKSPACE_QUOTA_BYTES ? perTenant(limits, used, null) : perCopy(limits)) };
}

/** In the transaction recording a copy of `adding` bytes: the tenant's lock, then the count again. */
export async function checkCopyUnderLock(tx: Tx, limits: CopyLimits, tenantId: string, adding: number): Promise<void> {
  const max = limits.TENANT_MAX_WORKSPACE_COPY_BYTES;
  if (!max) return;
  await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`workspace-copy-quota:${tenantId}`}, 0))`;
  const used = await copiedBytesUsed(tx, tenantId);
  if (used + adding > max) throw perTenant(limits, used, adding);
}
