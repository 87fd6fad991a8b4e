/**
 * resolveConfig (docs/seeds/000 `_resolve_agent`): which AgentSoulConfig a turn runs with.
 * - debugger: the agent's shared DRAFT (scope = draft row id);
 * - existing conversation: the version pinned by its binding, even after a newer publish;
 * - new published conversation: the agent's active config snapshot.
 */
import type { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Db } from '../../core/platform/db.js';
import { describeSoulIssues, parseSoul, soulDbIssues } from '../../core/domain/soul-validation.js';
import type { Prisma } from '../../core/generated/prisma/client.js';
import { findBuildDraft, findSharedDraft } from '../../core/domain/agent-configs.js';
import type { ActivityDeps } from '../deps.js';
import type { TurnContext } from './turn-context.js';
import { turnFailure } from '../errors.js';

export interface ResolvedConfig {
  configKind: 'published' | 'draft';
  /** For drafts: the shared DRAFT or the account's personal BUILD_DRAFT (which owns its own session). */
  draftType?: 'DRAFT' | 'BUILD_DRAFT';
  /** Immutable AgentConfigVersion id (published) or null (draft). */
  configVersionId: string | null;
  /** Draft row id or snapshot id: what the session binding is scoped by. */
  scopeId: string;
}

export interface Resolution {
  resolved: ResolvedConfig;
  soul: AgentSoulConfig;
  /** The conversation's binding (with its workspace) when it has one; published turns only. */
  conversationBinding: BindingWithWorkspace | null;
  /** The account's BUILD_DRAFT row when the turn runs on it (it owns its binding). */
  buildDraft: { id: string; agent_workspace_binding_id: string | null } | null;
}

export type BindingWithWorkspace = Prisma.AgentWorkspaceBindingGetPayload<{ include: { workspace: true } }>;

export function createResolveConfig({ db }: ActivityDeps) {
  return async function resolveConfig(ctx: TurnContext): Promise<Resolution> {
    const { msg, agent } = ctx;
    if (msg.invoke_from === 'debugger') {
      const build = (msg.metadata as { draft_type?: string }).draft_type === 'BUILD_DRAFT';
      const draft = build ? await findBuildDraft(db, agent.id, msg.account_id) : await findSharedDraft(db, agent.id);
      if (!draft)
        throw turnFailure(
          'agent_draft_not_found',
          404,
          build ? 'You have no build draft for this agent.' : 'The agent has no draft to debug.',
        );
      return {
        resolved: { configKind: 'draft', draftType: build ? 'BUILD_DRAFT' : 'DRAFT', configVersionId: null, scopeId: draft.id },
        soul: await runnableSoul(db, msg.tenant_id, draft.config),
        conversationBinding: null,
        buildDraft: build ? draft : null,
      };
    }
    const binding = ctx.conversationBinding;
    const versionId = binding?.agent_config_version_id ?? agent.active_config_snapshot_id;
    if (!versionId) throw turnFailure('agent_not_published', 400, 'The agent has no published configuration yet.');
    return {
      resolved: { configKind: 'published', configVersionId: versionId, scopeId: versionId },
      soul: await publishedSoul(db, msg.tenant_id, versionId),
      conversationBinding: binding,
      buildDraft: null,
    };
  };
}

/**
 * Published versions are immutable (a publish writes a new one), so each is read and schema-checked once per
 * process: a turn on a known version skips that read and the parse. The database checks (datasets, tool providers
 * can be deleted since) still run every turn, and cost nothing for a soul that names neither.
 */
const versionSouls = new Map<string, ReturnType<typeof parseSoul>>();
const VERSION_CACHE_SIZE = 500;

async function publishedSoul(db: Db, tenantId: string, versionId: string): Promise<AgentSoulConfig> {
  let hit = versionSouls.get(versionId);
  if (hit) {
    // Most recently used last: the oldest goes first when the map is full.
    versionSouls.delete(versionId);
    versionSouls.set(versionId, hit);
  } else {
    const version = await db.agentConfigVersion.findUniqueOrThrow({ where: { id: versionId }, select: { config_snapshot: true } });
    hit = parseSoul(version.config_snapshot);
    versionSouls.set(versionId, hit);
    if (versionSouls.size > VERSION_CACHE_SIZE) versionSouls.delete(versionSouls.keys().next().value!);
  }
  return checkedSoul(db, tenantId, hit);
}

/**
 * Stored JSON is an edge too (an old or hand-edited config): validated before use, with the checks that need the
 * database (core/domain/soul-validation.ts), so a config that cannot run fails here, non-retryably and naming the field,
 * instead of reaching the agent backend. The backend's registry is not asked per turn (one more round trip on
 * every turn): POST /runs plans the composition the same way and its 4xx fails the turn just as fast.
 */
async function runnableSoul(db: Db, tenantId: string, raw: unknown): Promise<AgentSoulConfig> {
  return checkedSoul(db, tenantId, parseSoul(raw));
}

async function checkedSoul(db: Db, tenantId: string, parsed: ReturnType<typeof parseSoul>): Promise<AgentSoulConfig> {
  const issues = parsed.soul ? await soulDbIssues(db, tenantId, parsed.soul) : parsed.issues;
  if (issues.length || !parsed.soul)
    throw turnFailure('agent_config_invalid', 400, `The agent configuration is invalid: ${describeSoulIssues(issues)}`);
  return parsed.soul;
}
