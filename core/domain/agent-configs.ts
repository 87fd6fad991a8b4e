/**
 * The agent's configs (docs/seeds/000): the shared DRAFT (one per agent, edited in place), each account's personal
 * BUILD_DRAFT, and immutable published versions numbered densely per agent, one of which is the agent's
 * active snapshot. The console, the turn's config resolution, the inner agent-config API and the demo
 * seeding all read and write them through here.
 */
import type { Db, Prisma } from '../platform/db.js';
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

/** Every save bumps the draft's revision: a build draft merging into the shared draft compares against it. */
export function updateDraft(q: Q, draftId: string, config: AgentSoulConfig, extra: { baseDraftRevision?: number } = {}) {
  return q.agentConfigDraft.update({
    where: { id: draftId },
    data: {
      config: json(config),
      revision: { increment: 1 },
      ...(extra.baseDraftRevision !== undefined ? { base_draft_revision: extra.baseDraftRevision } : {}),
    },
  });
}

/**
 * The caller's build draft, created on first save from the agent's active version. Its base on the shared draft
 * (`base_draft_revision`) is the shared draft's revision when it is created, or what the caller names (a rebase
 * after resolving a merge conflict); later saves keep it.
 */
export async function saveBuildDraft(
  q: Q,
  p: { tenantId: string; agentId: string; accountId: string; baseVersionId: string | null; baseDraftRevision?: number },
  config: AgentSoulConfig,
) {
  const existing = await findBuildDraft(q, p.agentId, p.accountId);
  if (existing) return updateDraft(q, existing.id, config, { baseDraftRevision: p.baseDraftRevision });
  const shared = p.baseDraftRevision === undefined ? await findSharedDraft(q, p.agentId) : null;
  return q.agentConfigDraft.create({
    data: {
      tenant_id: p.tenantId,
      agent_id: p.agentId,
      draft_type: 'BUILD_DRAFT',
      account_id: p.accountId,
      base_version_id: p.baseVersionId,
      base_draft_revision: p.baseDraftRevision ?? shared?.revision ?? null,
      config: json(config),
    },
  });
}

/**
 * The caller's build draft, made from the shared draft when there is none yet (issue 42 problem 4): a debugger turn
 * on "my build draft" before its first save runs on what the shared draft holds, as the studio showed it, instead
 * of failing. Based on the shared draft's revision like a first save; two first turns at once make one draft.
 */
export async function ensureBuildDraft(q: Q, p: { tenantId: string; agentId: string; accountId: string; baseVersionId: string | null }) {
  const existing = await findBuildDraft(q, p.agentId, p.accountId);
  if (existing) return existing;
  const shared = await findSharedDraft(q, p.agentId);
  if (!shared) return null;
  try {
    return await q.agentConfigDraft.create({
      data: {
        tenant_id: p.tenantId,
        agent_id: p.agentId,
        draft_type: 'BUILD_DRAFT',
        account_id: p.accountId,
        base_version_id: p.baseVersionId,
        base_draft_revision: shared.revision,
        config: json(shared.config),
      },
    });
  } catch (err) {
    if ((err as { code?: string }).code !== 'P2002') throw err;
    return findBuildDraft(q, p.agentId, p.accountId);
  }
}

export type MergeOutcome =
  { status: 'merged'; shared: DraftRow; build: DraftRow } | { status: 'conflict'; sharedRevision: number; baseRevision: number | null };
type DraftRow = NonNullable<Awaited<ReturnType<typeof findSharedDraft>>>;

/**
 * Merges a build draft into the shared draft (run it in a transaction): its config replaces the shared draft's
 * when the shared draft is still at the revision the build draft is based on — otherwise someone saved the shared
 * draft since, and replacing it would silently drop their edit: a conflict, unless `force`. The shared draft's
 * revision is re-checked in the update itself, so a save racing the merge is a conflict too. Afterwards the build
 * draft is based on the merged revision (merging again is clean); it keeps its session.
 */
export async function mergeBuildDraft(
  tx: Prisma.TransactionClient,
  p: { shared: DraftRow; build: DraftRow; config: AgentSoulConfig; force: boolean },
): Promise<MergeOutcome> {
  const { shared, build } = p;
  const conflict = { status: 'conflict' as const, sharedRevision: shared.revision, baseRevision: build.base_draft_revision };
  if (!p.force && build.base_draft_revision !== shared.revision) return conflict;
  const won = await tx.agentConfigDraft.updateMany({
    where: { id: shared.id, ...(p.force ? {} : { revision: shared.revision }) },
    data: { config: json(p.config), revision: { increment: 1 } },
  });
  if (won.count !== 1) return conflict;
  const merged = await tx.agentConfigDraft.findUniqueOrThrow({ where: { id: shared.id } });
  const rebased = await tx.agentConfigDraft.update({ where: { id: build.id }, data: { base_draft_revision: merged.revision } });
  return { status: 'merged', shared: merged, build: rebased };
}

/**
 * Publishes `config` as the agent's next immutable version and makes it the active snapshot: new
 * conversations use it, existing ones keep the version their binding pinned. Publishes of one agent are
 * serialised (advisory lock) so versions stay dense. Run it inside the caller's transaction.
 */
export async function publishVersion(
  tx: Prisma.TransactionClient,
  p: { tenantId: string; agentId: string; createdBy: string | null; fromDraftId?: string },
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
  // The draft it came from is now based on this version (what GET …/draft says as base_version_id).
  if (p.fromDraftId) await tx.agentConfigDraft.update({ where: { id: p.fromDraftId }, data: { base_version_id: v.id } });
  return v;
}

/** Newest first; `page` (skip/take) for the paginated console list. */
export function listVersions(q: Q, agentId: string, page: { skip?: number; take?: number } = {}) {
  return q.agentConfigVersion.findMany({ where: { agent_id: agentId }, orderBy: { version: 'desc' }, ...page });
}

export function findVersion(q: Q, agentId: string, versionId: string) {
  return q.agentConfigVersion.findFirst({ where: { id: versionId, agent_id: agentId } });
}
