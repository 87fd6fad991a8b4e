/**
 * The agent's configs (docs/seeds/000): the shared DRAFT (one per agent, edited in place), each account's personal
 * BUILD_DRAFT, and immutable published versions numbered densely per agent, one of which is the agent's
 * active snapshot. The console, the turn's config resolution, the inner agent-config API and the demo
 * seeding all read and write them through here.
 */
import type { Db, Prisma } from './db.js';
import type { AgentSoulConfig } from './soul.js';

type Q = Db | Prisma.TransactionClient;
const json = (config: AgentSoulConfig | unknown) => config as Prisma.InputJsonValue;

export function findSharedDraft(q: Q, agentId: string) {
  return q.agentConfigDraft.findFirst({ where: { agent_id: agentId, draft_type: 'DRAFT', account_id: null } });
}

export function findBuildDraft(q: Q, agentId: string, accountId: string | null) {
  return q.agentConfigDraft.findFirst({ where: { agent_id: agentId, draft_type: 'BUILD_DRAFT', account_id: accountId } });
}

export function createSharedDraft(q: Q, p: { tenantId: string; agentId: string; baseVersionId: string | null }, config: AgentSoulConfig) {
  return q.agentConfigDraft.create({
    data: { tenant_id: p.tenantId, agent_id: p.agentId, draft_type: 'DRAFT', config: json(config), base_version_id: p.baseVersionId },
  });
}

export function updateDraft(q: Q, draftId: string, config: AgentSoulConfig) {
  return q.agentConfigDraft.update({ where: { id: draftId }, data: { config: json(config) } });
}

/** The caller's build draft, created on first save from the agent's active version. */
export async function saveBuildDraft(
  q: Q,
  p: { tenantId: string; agentId: string; accountId: string; baseVersionId: string | null },
  config: AgentSoulConfig,
) {
  const existing = await findBuildDraft(q, p.agentId, p.accountId);
  if (existing) return updateDraft(q, existing.id, config);
  return q.agentConfigDraft.create({
    data: {
      tenant_id: p.tenantId,
      agent_id: p.agentId,
      draft_type: 'BUILD_DRAFT',
      account_id: p.accountId,
      base_version_id: p.baseVersionId,
      config: json(config),
    },
  });
}

/**
 * Publishes `config` as the agent's next immutable version and makes it the active snapshot: new
 * conversations use it, existing ones keep the version their binding pinned. Publishes of one agent are
 * serialised (advisory lock) so versions stay dense. Run it inside the caller's transaction.
 */
export async function publishVersion(
  tx: Prisma.TransactionClient,
  p: { tenantId: string; agentId: string; createdBy: string | null },
  config: AgentSoulConfig,
) {
  await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${p.agentId}, 11))`;
  const last = await tx.agentConfigVersion.findFirst({
    where: { agent_id: p.agentId },
    orderBy: { version: 'desc' },
    select: { version: true },
  });
  const v = await tx.agentConfigVersion.create({
    data: {
      tenant_id: p.tenantId,
      agent_id: p.agentId,
      version: (last?.version ?? 0) + 1,
      config_snapshot: json(config),
      created_by: p.createdBy,
    },
  });
  await tx.agent.update({ where: { id: p.agentId }, data: { active_config_snapshot_id: v.id } });
  return v;
}

export function listVersions(q: Q, agentId: string) {
  return q.agentConfigVersion.findMany({ where: { agent_id: agentId }, orderBy: { version: 'desc' } });
}

export function findVersion(q: Q, agentId: string, versionId: string) {
  return q.agentConfigVersion.findFirst({ where: { id: versionId, agent_id: agentId } });
}
