/**
 * resolveConfig (docs/seeds/000 `_resolve_agent`): which AgentSoulConfig a turn runs with.
 * - debugger: the agent's shared DRAFT (scope = draft row id);
 * - existing conversation: the version pinned by its binding, even after a newer publish;
 * - new published conversation: the agent's active config snapshot.
 */
import { AgentSoulConfig } from '../../core/soul.js';
import type { Prisma } from '../../core/generated/prisma/client.js';
import { findBuildDraft, findSharedDraft } from '../../core/agent-configs.js';
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
        soul: parseSoul(draft.config),
        conversationBinding: null,
        buildDraft: build ? draft : null,
      };
    }
    const bindingId = msg.conversation.agent_workspace_binding_id;
    const binding = bindingId
      ? await db.agentWorkspaceBinding.findUnique({ where: { id: bindingId }, include: { workspace: true } })
      : null;
    const versionId = binding?.agent_config_version_id ?? agent.active_config_snapshot_id;
    if (!versionId) throw turnFailure('agent_not_published', 400, 'The agent has no published configuration yet.');
    const version = await db.agentConfigVersion.findUniqueOrThrow({ where: { id: versionId }, select: { config_snapshot: true } });
    return {
      resolved: { configKind: 'published', configVersionId: versionId, scopeId: versionId },
      soul: parseSoul(version.config_snapshot),
      conversationBinding: binding,
      buildDraft: null,
    };
  };
}

/** Stored JSON is an edge too: validated before use. */
function parseSoul(raw: unknown): AgentSoulConfig {
  const parsed = AgentSoulConfig.safeParse(raw);
  if (!parsed.success)
    throw turnFailure('agent_config_invalid', 400, `The agent configuration is invalid: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}
