/**
 * loadOrCreateBinding (seed 000 AgentAppWorkspaceStore.load_or_create): the AgentWorkspaceBinding of the
 * session scope. First turn creates it (idempotently, keyed by the scope key) and writes its id back to the
 * owner; later turns validate its generation (config version, kind, home snapshot).
 */
import crypto from 'node:crypto';
import type { ActivityDeps } from '../deps.js';
import { turnFailure } from '../errors.js';
import type { Prisma } from '../../core/generated/prisma/client.js';
import type { Resolution } from './resolve-config.js';
import type { TurnContext } from './turn-context.js';

export const HOME_SNAPSHOT_ID = 'home-v1';

/** AgentAppSessionScope: (tenant, app, conversation, agent, config snapshot). */
export function sessionScopeKey(s: { tenantId: string; appId: string; conversationId: string; agentId: string; scopeId: string }): string {
  return crypto.createHash('sha256').update([s.tenantId, s.appId, s.conversationId, s.agentId, s.scopeId].join('|')).digest('hex');
}

export type Binding = Prisma.AgentWorkspaceBindingGetPayload<object>;

function generationMismatch(b: Pick<Binding, 'config_kind' | 'session_scope_config_version_id'>) {
  return turnFailure(
    'agent_binding_generation_mismatch',
    409,
    `This conversation's agent session belongs to another configuration (${b.config_kind} ${b.session_scope_config_version_id}); start a new conversation.`,
  );
}

export function createLoadOrCreateBinding({ db }: ActivityDeps) {
  return async function loadOrCreateBinding(ctx: TurnContext, r: Resolution): Promise<{ binding: Binding; created: boolean }> {
    const { resolved } = r;
    const { msg, agent } = ctx;
    const conv = msg.conversation;
    // A personal build draft owns its session (seed 000: owner type BUILD_DRAFT); otherwise the conversation does.
    const owner = r.buildDraft
      ? { type: 'BUILD_DRAFT' as const, id: r.buildDraft.id, bindingId: r.buildDraft.agent_workspace_binding_id }
      : { type: 'CONVERSATION' as const, id: conv.id, bindingId: conv.agent_workspace_binding_id };

    if (owner.bindingId) {
      const b =
        r.conversationBinding?.id === owner.bindingId
          ? r.conversationBinding
          : await db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: owner.bindingId }, include: { workspace: true } });
      const ok =
        b.session_scope_config_version_id === resolved.scopeId &&
        b.config_kind === resolved.configKind &&
        b.home_snapshot_id === b.workspace.home_snapshot_id;
      if (!ok) throw generationMismatch(b);
      const { workspace: _workspace, ...binding } = b;
      return { binding, created: false };
    }

    const scopeKey = sessionScopeKey({ tenantId: msg.tenant_id, appId: msg.app_id, conversationId: owner.type === 'BUILD_DRAFT' ? `build:${owner.id}` : conv.id, agentId: agent.id, scopeId: resolved.scopeId });
    const workspace =
      ctx.workspace ??
      (await db.agentWorkspace.findFirst({ where: { agent_id: agent.id }, orderBy: { created_at: 'asc' } })) ??
      (await db.agentWorkspace.create({
        data: { tenant_id: msg.tenant_id, agent_id: agent.id, home_snapshot_id: HOME_SNAPSHOT_ID, backend_workspace_ref: `ws-${agent.id}` },
      }));
    // Insert-or-ignore by scope key, then read: idempotent, race-safe, two statements (Prisma's upsert
    // here is a five-statement transaction).
    await db.agentWorkspaceBinding.createMany({
      skipDuplicates: true,
      data: {
        tenant_id: msg.tenant_id,
        app_id: msg.app_id,
        agent_id: agent.id,
        workspace_id: workspace.id,
        owner_type: owner.type,
        owner_id: owner.id,
        scope_key: scopeKey,
        agent_config_version_id: resolved.configVersionId,
        session_scope_config_version_id: resolved.scopeId,
        config_kind: resolved.configKind,
        home_snapshot_id: workspace.home_snapshot_id,
        backend_binding_ref: `participant-${crypto.randomUUID()}`,
      },
    });
    // Skipped on the owner's unique key too: an earlier attempt bound this owner and crashed before the
    // write-back below. Same scope: it is ours. Another scope (the agent was republished meanwhile): the
    // same generation error as a stale binding.
    const binding =
      (await db.agentWorkspaceBinding.findUnique({ where: { scope_key: scopeKey } })) ??
      (await db.agentWorkspaceBinding.findUniqueOrThrow({ where: { owner_type_owner_id: { owner_type: owner.type, owner_id: owner.id } } }));
    if (binding.scope_key !== scopeKey) throw generationMismatch(binding);
    // Write the binding id back to its owner (first writer wins; a retry finds it already set).
    if (owner.type === 'BUILD_DRAFT') {
      await db.agentConfigDraft.updateMany({ where: { id: owner.id, agent_workspace_binding_id: null }, data: { agent_workspace_binding_id: binding.id } });
    } else {
      await db.conversation.updateMany({ where: { id: conv.id, agent_workspace_binding_id: null }, data: { agent_workspace_binding_id: binding.id } });
    }
    return { binding, created: true };
  };
}
