/**
 * loadOrCreateBinding (docs/seeds/000 AgentAppWorkspaceStore.load_or_create): the AgentWorkspaceBinding of the
 * session scope. First turn creates it (idempotently, keyed by the scope key) together with its own
 * workspace (docs/seeds/004: every binding gets a real workspace; its directory is created by the backend on
 * first use) and writes its id back to the owner; later turns validate its generation (config version,
 * kind, home snapshot, workspace generation). A stale binding is retired (core/domain/turn/bindings.ts: the api
 * owns retirement) and the turn fails with `agent_binding_generation_mismatch`.
 */
import crypto from 'node:crypto';
import {
  HOME_SNAPSHOT_ID,
  REPLACED_ON_NEXT_TURN,
  retireBinding,
  sessionScopeKey,
  workspaceIdFor,
  type Binding,
} from '../../core/domain/turn/bindings.js';
import type { ActivityDeps } from '../deps.js';
import { turnFailure } from '../errors.js';
import type { Resolution } from './resolve-config.js';
import type { TurnContext } from './turn-context.js';

function generationMismatch(b: Pick<Binding, 'config_kind' | 'session_scope_config_version_id'>) {
  return turnFailure(
    'agent_binding_generation_mismatch',
    409,
    `This conversation's agent session belongs to another configuration (${b.config_kind} ${b.session_scope_config_version_id}); start a new conversation.`,
  );
}

/**
 * The first turn's binding in one statement: workspace insert, binding insert (on the workspace row just inserted),
 * write-back to the owner (conversation or build draft, only while it has none). Returns the binding, or null when
 * the workspace or the binding already existed: then nothing was written.
 */
async function createFreshBinding(
  db: ActivityDeps['db'],
  b: {
    workspaceId: string;
    tenantId: string;
    appId: string;
    agentId: string;
    owner: { type: 'CONVERSATION' | 'BUILD_DRAFT'; id: string };
    scopeKey: string;
    resolved: Resolution['resolved'];
    /** The replaced binding (next incarnation): the owner's pointer moves from it; null for the first binding. */
    replaces?: { id: string; incarnation: number } | null;
  },
): Promise<Binding | null> {
  const incarnation = (b.replaces?.incarnation ?? 0) + 1;
  const replaces = b.replaces?.id ?? null;
  const rows = await db.$queryRaw<Binding[]>`
    with ws as (
      insert into agent_workspaces (id, tenant_id, agent_id, home_snapshot_id, backend_workspace_ref)
      values (${b.workspaceId}::uuid, ${b.tenantId}::uuid, ${b.agentId}::uuid, ${HOME_SNAPSHOT_ID}, ${b.workspaceId})
      on conflict do nothing
      returning id, home_snapshot_id, generation
    ), binding as (
      insert into agent_workspace_bindings (id, tenant_id, app_id, agent_id, workspace_id, owner_type, owner_id, scope_key,
        agent_config_version_id, session_scope_config_version_id, config_kind, home_snapshot_id, generation, backend_binding_ref,
        incarnation)
      select ${crypto.randomUUID()}::uuid, ${b.tenantId}::uuid, ${b.appId}::uuid, ${b.agentId}::uuid, ws.id,
             ${b.owner.type}::"BindingOwnerType", ${b.owner.id}::uuid, ${b.scopeKey}, ${b.resolved.configVersionId}::uuid,
             ${b.resolved.scopeId}::uuid, ${b.resolved.configKind}, ws.home_snapshot_id, ws.generation,
             ${`participant-${crypto.randomUUID()}`}, ${incarnation}::int
        from ws
      on conflict do nothing
      returning *
    ), conversation as (
      update conversations set agent_workspace_binding_id = binding.id, updated_at = now() from binding
       where conversations.id = ${b.owner.id}::uuid and ${b.owner.type} = 'CONVERSATION'
         and conversations.agent_workspace_binding_id is not distinct from ${replaces}::uuid
    ), draft as (
      update agent_config_drafts set agent_workspace_binding_id = binding.id, updated_at = now() from binding
       where agent_config_drafts.id = ${b.owner.id}::uuid and ${b.owner.type} = 'BUILD_DRAFT'
         and agent_config_drafts.agent_workspace_binding_id is not distinct from ${replaces}::uuid
    )
    select * from binding`;
  return rows[0] ?? null;
}

type Owner = { type: 'BUILD_DRAFT' | 'CONVERSATION'; id: string; bindingId: string | null };
type Replaced = { id: string; incarnation: number };

/**
 * The turn's binding in its steps: the owner's current one kept (or retired when it no longer fits: a generation
 * error), else the owner's next binding created in one statement, with an idempotent slow path for a retry or a race.
 */
export function createLoadOrCreateBinding({ db, config }: ActivityDeps) {
  return async function loadOrCreateBinding(ctx: TurnContext, r: Resolution): Promise<{ binding: Binding; created: boolean }> {
    const { resolved } = r;
    const { msg, agent } = ctx;
    const conv = msg.conversation;
    // A personal build draft owns its session (docs/seeds/000: owner type BUILD_DRAFT); otherwise the conversation does.
    const owner: Owner = r.buildDraft
      ? { type: 'BUILD_DRAFT', id: r.buildDraft.id, bindingId: r.buildDraft.agent_workspace_binding_id }
      : { type: 'CONVERSATION', id: conv.id, bindingId: conv.agent_workspace_binding_id };

    const current = owner.bindingId ? await currentBinding({ db, config }, r, owner.bindingId) : null;
    if (current && 'binding' in current) return { binding: current.binding, created: false };
    const replaces = current?.replaces ?? null;

    const incarnation = (replaces?.incarnation ?? 0) + 1;
    const baseKey = sessionScopeKey({
      tenantId: msg.tenant_id,
      appId: msg.app_id,
      conversationId: owner.type === 'BUILD_DRAFT' ? `build:${owner.id}` : conv.id,
      agentId: agent.id,
      scopeId: resolved.scopeId,
    });
    // A later incarnation has a key (and so a workspace) of its own.
    const scopeKey = incarnation === 1 ? baseKey : `${baseKey}#${incarnation}`;
    // The binding's own workspace, keyed by the scope like the binding (a retry finds the same row).
    const workspaceId = workspaceIdFor(scopeKey);
    // A first attempt inserts workspace and binding and writes the binding back to its owner in one statement (one
    // transaction, one fsync: it used to be three). When anything of it already exists (a retry, a race) the
    // statement inserts nothing and the steps below, each idempotent, find what is there.
    const fresh = await createFreshBinding(db, {
      workspaceId,
      tenantId: msg.tenant_id,
      appId: msg.app_id,
      agentId: agent.id,
      owner,
      scopeKey,
      resolved,
      replaces,
    });
    if (fresh) return { binding: fresh, created: true };
    const binding = await bindAfterEarlierAttempt(db, ctx, r, { owner, scopeKey, workspaceId, incarnation, replaces });
    return { binding, created: true };
  };
}

/**
 * The owner's binding as it is: kept when it still fits the resolved scope and its workspace; to be replaced when its
 * workspace was lost or the build draft's lifecycle retired it; otherwise retired now and refused (a generation error).
 */
async function currentBinding(
  { db, config }: Pick<ActivityDeps, 'db' | 'config'>,
  r: Resolution,
  bindingId: string,
): Promise<{ binding: Binding } | { replaces: Replaced }> {
  const { resolved } = r;
  const b =
    r.conversationBinding?.id === bindingId
      ? r.conversationBinding
      : await db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: bindingId }, include: { workspace: true } });
  if (b.retired_at && b.retired_reason && REPLACED_ON_NEXT_TURN.has(b.retired_reason)) {
    // Its workspace was lost, or the build draft's lifecycle retired it (issue 31): this turn starts the owner's
    // next binding (a fresh session and workspace), in the same scope.
    return { replaces: { id: b.id, incarnation: b.incarnation } };
  }
  const ok =
    b.session_scope_config_version_id === resolved.scopeId &&
    b.config_kind === resolved.configKind &&
    b.home_snapshot_id === b.workspace.home_snapshot_id &&
    b.generation === b.workspace.generation &&
    b.workspace.status === 'active' &&
    b.retired_at === null;
  if (!ok) {
    await retireBinding(db, config, b.id);
    throw generationMismatch(b);
  }
  const { workspace: _workspace, ...binding } = b;
  return { binding };
}

/**
 * The slow path, when the one-statement create inserted nothing: the workspace exists (an earlier attempt, a race),
 * the binding is inserted or found, and written back to its owner; each step idempotent.
 */
async function bindAfterEarlierAttempt(
  db: ActivityDeps['db'],
  { msg, agent }: TurnContext,
  { resolved }: Resolution,
  k: { owner: Owner; scopeKey: string; workspaceId: string; incarnation: number; replaces: Replaced | null },
): Promise<Binding> {
  const { owner, scopeKey, workspaceId, incarnation, replaces } = k;
  // Here the workspace exists (that is why the statement above inserted nothing): read it.
  const workspace = await db.agentWorkspace.findUniqueOrThrow({ where: { id: workspaceId } });
  // The binding may still be missing (its workspace came from an earlier attempt): insert-or-ignore by scope key,
  // returning what it inserted; idempotent and race-safe (Prisma's upsert here is a five-statement transaction).
  const [created] = await db.agentWorkspaceBinding.createManyAndReturn({
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
      generation: workspace.generation,
      backend_binding_ref: `participant-${crypto.randomUUID()}`,
      incarnation,
    },
  });
  // Skipped on the owner's unique key too: an earlier attempt bound this owner and crashed before the
  // write-back below. Same scope: it is ours. Another scope (the agent was republished meanwhile): the
  // same generation error as a stale binding.
  const binding =
    created ??
    (await db.agentWorkspaceBinding.findUnique({ where: { scope_key: scopeKey } })) ??
    (await db.agentWorkspaceBinding.findUniqueOrThrow({
      where: { owner_type_owner_id_incarnation: { owner_type: owner.type, owner_id: owner.id, incarnation } },
    }));
  if (binding.scope_key !== scopeKey) throw generationMismatch(binding);
  // Write the binding id back to its owner (first writer wins; a retry finds it already set).
  const was = replaces?.id ?? null;
  if (owner.type === 'BUILD_DRAFT') {
    await db.agentConfigDraft.updateMany({
      where: { id: owner.id, agent_workspace_binding_id: was },
      data: { agent_workspace_binding_id: binding.id },
    });
  } else {
    await db.conversation.updateMany({
      where: { id: owner.id, agent_workspace_binding_id: was },
      data: { agent_workspace_binding_id: binding.id },
    });
  }
  return binding;
}
