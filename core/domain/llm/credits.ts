/**
 * Credits for system-hosted model calls. Each call has a billing request id
 * (`<invocation_id>:<call_index>`); its CreditLedger row is unique on it, so a replayed call
 * inserts nothing and charges nothing. Custom-credential calls get a row with `billable = false`
 * and move no credits. A tenant without a CreditPool is unmetered (rows keep `pool_id = null`).
 */
import crypto from 'node:crypto';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { PoolState } from './gateway-cache.js';

type Db = Pick<PrismaClient, 'creditPool' | 'creditLedger' | '$transaction' | '$queryRaw'>;

export function billingRequestId(invocationId: string, callIndex: number): string {
  return `${invocationId}:${callIndex}`;
}

export type QuotaCheck =
  | { allowed: true; /** The ledger already has this billing id: the replay will not be charged. */ alreadyBilled: boolean }
  | { allowed: false; used: bigint; limit: bigint };

/** What a model call's preparation reads, in one round trip (issue 33): the tenant's stored credentials for the
 * provider, and the quota check of a system-hosted call — refused when the pool is exhausted (used >= limit), unless
 * the ledger already has this billing id (a replay, paid for). */
export interface CallState {
  encryptedConfig: string | null;
  quota: QuotaCheck;
  /** The pool as the gateway cache keeps it (gateway-cache.ts): none, or whether it is used up. */
  pool: PoolState;
}

export async function readCallState(db: Db, tenantId: string, provider: string, billingId: string): Promise<CallState> {
  const [row] = await db.$queryRaw<
    { encrypted_config: string | null; existing: boolean; quota_limit: bigint | null; quota_used: bigint | null }[]
  >`
    SELECT (SELECT encrypted_config FROM model_provider_credentials WHERE tenant_id = ${tenantId}::uuid AND provider = ${provider})
             AS encrypted_config,
           EXISTS (SELECT 1 FROM credit_ledger WHERE billing_request_id = ${billingId}) AS existing, p.quota_limit, p.quota_used
      FROM (SELECT 1) one LEFT JOIN credit_pools p ON p.tenant_id = ${tenantId}::uuid`;
  const pool: PoolState =
    row && row.quota_limit !== null && row.quota_used !== null
      ? { exists: true, exhausted: BigInt(row.quota_used) >= BigInt(row.quota_limit) }
      : { exists: false };
  return { encryptedConfig: row?.encrypted_config ?? null, quota: quotaOf(row), pool };
}

function quotaOf(row: { existing: boolean; quota_limit: bigint | null; quota_used: bigint | null } | undefined): QuotaCheck {
  if (row?.existing) return { allowed: true, alreadyBilled: true };
  if (row && row.quota_limit !== null && row.quota_used !== null && BigInt(row.quota_used) >= BigInt(row.quota_limit))
    return { allowed: false, used: BigInt(row.quota_used), limit: BigInt(row.quota_limit) };
  return { allowed: true, alreadyBilled: false };
}

export interface LedgerEntry {
  tenantId: string;
  billingRequestId: string;
  agentRunId: string;
  provider: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** Integer micro-units of currency. */
  credits: bigint;
  /** Decimal string, at most 7 decimals. */
  totalPrice: string;
  currency: string;
  billable: boolean;
  /** Token counts estimated (a call cut before the provider reported usage). */
  estimated?: boolean;
}

/**
 * Record a call, exactly once per billing request id, in one transaction: insert the ledger row
 * (ON CONFLICT DO NOTHING) and increment the pool only when the row was inserted. One correction is
 * allowed: a completed call replaces an estimated row of the same id (a call cut by a broken
 * connection, then replayed to the end) and moves only the difference. Returns whether this call
 * wrote the row and how many credits it moved.
 */
export async function recordUsage(
  db: Db,
  e: LedgerEntry,
): Promise<{
  recorded: boolean;
  charged: bigint;
  /** The pool after this call's increment (set when it moved). */ poolExhausted?: boolean;
}> {
  const credits = e.billable ? e.credits : 0n;
  const estimated = e.estimated === true;
  // The common case in one statement (issue 33: one metering write per model call, no interactive transaction): the
  // ledger row with its pool, and the pool's increment only when the row was inserted (a data-modifying CTE runs once,
  // in the statement's transaction). A conflict (a replayed call) inserts and increments nothing.
  const [first] = await db.$queryRaw<{ inserted: number; pool_id: string | null; exhausted: boolean | null }[]>`
    WITH pool AS (SELECT id FROM credit_pools WHERE tenant_id = ${e.tenantId}::uuid AND ${e.billable}::boolean),
    ins AS (
      INSERT INTO credit_ledger
        (id, tenant_id, pool_id, billing_request_id, agent_run_id, provider, model,
         prompt_tokens, completion_tokens, credits, total_price, currency, billable, estimated)
      VALUES
        (${crypto.randomUUID()}::uuid, ${e.tenantId}::uuid, (SELECT id FROM pool), ${e.billingRequestId},
         ${e.agentRunId}, ${e.provider}, ${e.model}, ${e.promptTokens}, ${e.completionTokens},
         ${credits.toString()}::bigint, ${e.totalPrice}::numeric, ${e.currency}, ${e.billable}, ${estimated})
      ON CONFLICT (billing_request_id) DO NOTHING
      RETURNING pool_id, credits),
    upd AS (
      UPDATE credit_pools p SET quota_used = p.quota_used + ins.credits, updated_at = now()
        FROM ins WHERE p.id = ins.pool_id AND ins.credits <> 0
      RETURNING p.id, p.quota_used >= p.quota_limit AS exhausted)
    SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT id::text FROM pool) AS pool_id, (SELECT exhausted FROM upd) AS exhausted`;
  const pool = first?.pool_id ? { id: first.pool_id } : null;
  if (first?.inserted === 1)
    return {
      recorded: true,
      charged: pool ? credits : 0n,
      ...(typeof first.exhausted === 'boolean' ? { poolExhausted: first.exhausted } : {}),
    };
  if (estimated) return { recorded: false, charged: 0n };
  // The row may hold an estimate of this very call (a cut call replayed to its end): the exact counts replace it, once.
  return db.$transaction(async (tx) => {
    let charged = 0n;
    let recorded = false;
    const replaced = await tx.$queryRaw<{ old_credits: bigint }[]>`
      UPDATE credit_ledger l
         SET prompt_tokens = ${e.promptTokens}, completion_tokens = ${e.completionTokens},
             credits = ${credits.toString()}::bigint, total_price = ${e.totalPrice}::numeric, estimated = false
        FROM (SELECT id, credits AS old_credits FROM credit_ledger WHERE billing_request_id = ${e.billingRequestId} AND estimated FOR UPDATE) o
       WHERE l.id = o.id
   RETURNING o.old_credits`;
    if (replaced[0]) {
      recorded = true;
      charged = credits - BigInt(replaced[0].old_credits);
    }
    if (recorded && pool && charged !== 0n) {
      await tx.creditPool.update({ where: { id: pool.id }, data: { quota_used: { increment: charged } } });
    }
    return { recorded, charged: recorded && pool ? charged : 0n };
  });
}
