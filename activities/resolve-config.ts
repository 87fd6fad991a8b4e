/**
 * resolveConfig (seed 000 `_resolve_agent`): which AgentSoulConfig a turn runs with.
 * - debugger: the agent's shared DRAFT (scope = draft row id);
 * - existing conversation: the version pinned by its binding, even after a newer publish;
 * - new published conversation: the agent's active config snapshot.
 */
import { AgentSoulConfig } from '../core/soul.js';
import type { ActivityDeps } from './deps.js';
import { turnFailure } from './errors.js';

export interface ResolvedConfig {
  configKind: 'published' | 'draft';
  /** For drafts: the shared DRAFT or the account's personal BUILD_DRAFT (which owns its own session). */
  draftType?: 'DRAFT' | 'BUILD_DRAFT';
  /** Immutable AgentConfigVersion id (published) or null (draft). */
  configVersionId: string | null;
  /** Draft row id or snapshot id: what the session binding is scoped by. */
  scopeId: string;
}

export function createResolveConfig({ db }: ActivityDeps) {
  return async function resolveConfig(input: { messageId: string }): Promise<ResolvedConfig> {
    const msg = await db.message.findUniqueOrThrow({ where: { id: input.messageId }, include: { conversation: true } });
    const agent = await db.agent.findUnique({ where: { app_id: msg.app_id } });
    if (!agent) throw turnFailure('agent_not_found', 404, 'This app has no agent.');

    let resolved: ResolvedConfig;
    if (msg.invoke_from === 'debugger') {
      const build = (msg.metadata as { draft_type?: string }).draft_type === 'BUILD_DRAFT';
      const draft = build
        ? await db.agentConfigDraft.findFirst({ where: { agent_id: agent.id, draft_type: 'BUILD_DRAFT', account_id: msg.account_id } })
        : await db.agentConfigDraft.findFirst({ where: { agent_id: agent.id, draft_type: 'DRAFT', account_id: null } });
      if (!draft) throw turnFailure('agent_draft_not_found', 404, build ? 'You have no build draft for this agent.' : 'The agent has no draft to debug.');
      resolved = { configKind: 'draft', draftType: build ? 'BUILD_DRAFT' : 'DRAFT', configVersionId: null, scopeId: draft.id };
    } else {
      const bindingId = msg.conversation.agent_workspace_binding_id;
      const binding = bindingId ? await db.agentWorkspaceBinding.findUnique({ where: { id: bindingId } }) : null;
      const versionId = binding?.agent_config_version_id ?? agent.active_config_snapshot_id;
      if (!versionId) throw turnFailure('agent_not_published', 400, 'The agent has no published configuration yet.');
      resolved = { configKind: 'published', configVersionId: versionId, scopeId: versionId };
    }
    if (msg.agent_config_version_id !== resolved.configVersionId) {
      await db.message.update({ where: { id: msg.id }, data: { agent_config_version_id: resolved.configVersionId } });
    }
    return resolved;
  };
}

/** Loads the soul config a resolved scope points at (validated; stored JSON is an edge too). */
export async function loadSoulConfig(db: ActivityDeps['db'], resolved: ResolvedConfig): Promise<AgentSoulConfig> {
  const raw =
    resolved.configKind === 'published'
      ? (await db.agentConfigVersion.findUniqueOrThrow({ where: { id: resolved.configVersionId! } })).config_snapshot
      : (await db.agentConfigDraft.findUniqueOrThrow({ where: { id: resolved.scopeId } })).config;
  const parsed = AgentSoulConfig.safeParse(raw);
  if (!parsed.success) throw turnFailure('agent_config_invalid', 400, `The agent configuration is invalid: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}
