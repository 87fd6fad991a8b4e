/**
 * How many schedules and webhooks an app and a tenant may hold (issue 47: one tenant made 40 schedules in 11 s and 110
 * webhooks on one app). The count and the insert run in one transaction under a per-tenant advisory lock, so parallel
 * creates cannot all pass a count taken before any of them inserted. Limits: SCHEDULES_PER_APP / _PER_TENANT,
 * WEBHOOKS_PER_APP / _PER_TENANT (core/platform/config.ts; 0 is no limit).
 */
import type { Prisma } from '../platform/db.js';
import type { Db } from '../platform/db.js';

export type AutomationKind = 'schedule' | 'webhook';

export interface AutomationLimits {
  perApp: number;
  perTenant: number;
}

export type QuotaOutcome<T> = { created: T } | { refused: { scope: 'app' | 'tenant'; limit: number } };

/**
 * Runs `create` when the app and the tenant are below their limits for `kind`, counted under the tenant's lock in the
 * same transaction; otherwise creates nothing and says which limit is full.
 */
export async function createWithinQuota<T>(
  db: Db,
  kind: AutomationKind,
  limits: AutomationLimits,
  owner: { tenantId: string; appId: string },
  create: (tx: Prisma.TransactionClient) => Promise<T>,
): Promise<QuotaOutcome<T>> {
  return db.$transaction(async (tx) => {
    await tx.$executeRaw`select pg_advisory_xact_lock(hashtext(${`automation:${kind}:${owner.tenantId}`}))`;
    const [counted] =
      kind === 'schedule'
        ? await tx.$queryRaw<{ in_app: number; in_tenant: number }[]>`
            select count(*) filter (where app_id = ${owner.appId}::uuid)::int as in_app, count(*)::int as in_tenant
              from app_schedules where tenant_id = ${owner.tenantId}::uuid`
        : await tx.$queryRaw<{ in_app: number; in_tenant: number }[]>`
            select count(*) filter (where app_id = ${owner.appId}::uuid)::int as in_app, count(*)::int as in_tenant
              from app_webhooks where tenant_id = ${owner.tenantId}::uuid`;
    const { in_app: inApp, in_tenant: inTenant } = counted!;
    if (limits.perApp && inApp >= limits.perApp) return { refused: { scope: 'app' as const, limit: limits.perApp } };
    if (limits.perTenant && inTenant >= limits.perTenant) return { refused: { scope: 'tenant' as const, limit: limits.perTenant } };
    return { created: await create(tx) };
  });
}
