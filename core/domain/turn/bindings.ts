/**
 * The binding's records (docs/seeds/000 AgentWorkspaceBinding, 004): its identity — the session scope's key and the
 * deterministic workspace id a first turn allocates under it, the home template — and its retirement, which the api
 * owns (a deleted conversation, a build draft's lifecycle) and the turn uses when a binding is stale. Loading or
 * creating a turn's binding is the turn's own step (activities/prepare/binding.ts `loadOrCreateBinding`).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { Db, Prisma } from '../../platform/db.js';
import { bucketOf, type WorkspacesConfig } from '../workspace-bucket.js';
import { removeMarker } from '../workspace-marker.js';
import { removeTree } from '../workspace-tree.js';

/** The home template a fresh workspace starts from (an empty directory with a private tmp). A workspace
 * made from another template belongs to another generation of bindings. */
export const HOME_SNAPSHOT_ID = 'home-v1';

/** The workspace id of a scope: deterministic, so a retried first turn allocates the same workspace. */
export function workspaceIdFor(scopeKey: string): string {
  const h = crypto.createHash('sha256').update(`workspace:${scopeKey}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16], 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Why a binding was retired. `binding_lost` and `build_draft_lifecycle` are replaced: the owner's next turn starts
 * the next incarnation (a fresh session and workspace) instead of failing with agent_binding_generation_mismatch.
 */
export type RetireReason = 'generation_mismatch' | 'conversation_deleted' | 'binding_lost' | 'build_draft_lifecycle';
export const REPLACED_ON_NEXT_TURN: ReadonlySet<string> = new Set<RetireReason>(['binding_lost', 'build_draft_lifecycle']);

/**
 * Retires a binding and, when no live binding shares it, its workspace: status + retired_at, files
 * removed by descriptor (renamed aside at once; what a process still running in it re-creates is left to the sweeper).
 * Idempotent (a retry removes whatever is left). The api owns retirement (docs/seeds/004).
 */
export async function retireBinding(
  db: Db,
  /** Where the workspace lives: WORKSPACES_DIR, or the bucket when WORKSPACE_STORE=s3 (then the disk is never used). */
  workspaces: WorkspacesConfig,
  bindingId: string,
  reason: RetireReason = 'generation_mismatch',
  opts: { keepFiles?: boolean } = {},
): Promise<void> {
  const b = await db.agentWorkspaceBinding.findUnique({ where: { id: bindingId }, select: { workspace_id: true } });
  if (!b) return;
  const now = new Date();
  await db.agentWorkspaceBinding.updateMany({
    where: { id: bindingId, retired_at: null },
    data: { retired_at: now, retired_reason: reason },
  });
  const shared = await db.agentWorkspaceBinding.count({ where: { workspace_id: b.workspace_id, retired_at: null } });
  if (shared > 0) return;
  await db.agentWorkspace.updateMany({ where: { id: b.workspace_id, status: 'active' }, data: { status: 'retired', retired_at: now } });
  if (opts.keepFiles) return;
  const bucket = bucketOf(workspaces);
  if (bucket) {
    // s3: the pointer first (no backend restores the workspace again), then its versions and blobs.
    await bucket.remove(b.workspace_id);
    return;
  }
  // Never fs.rm: a process of the workspace may still swap entries for links to host files (core/domain/workspace-tree.ts).
  await removeTree(path.join(workspaces.workspacesDir, b.workspace_id));
  removeMarker(path.join(workspaces.workspacesDir, b.workspace_id));
}

/** AgentAppSessionScope: (tenant, app, conversation, agent, config snapshot). */
export function sessionScopeKey(s: { tenantId: string; appId: string; conversationId: string; agentId: string; scopeId: string }): string {
  return crypto.createHash('sha256').update([s.tenantId, s.appId, s.conversationId, s.agentId, s.scopeId].join('|')).digest('hex');
}

export type Binding = Prisma.AgentWorkspaceBindingGetPayload<object>;

/**
 * A build draft's lifecycle retires its binding (issue 31): merged into the shared draft, published, discarded, or
 * saved with another layer topology. Its session belonged to the draft as it was; the draft's next debugger turn
 * starts the next binding (fresh session and workspace) instead of meeting a stale snapshot.
 */
export async function retireBuildDraftBinding(db: Db, workspaces: WorkspacesConfig, draftId: string): Promise<boolean> {
  const draft = await db.agentConfigDraft.findUnique({ where: { id: draftId }, select: { agent_workspace_binding_id: true } });
  if (!draft?.agent_workspace_binding_id) return false;
  // A turn still on it (running, or waiting for a human) keeps its files until it ends: the binding is retired for the
  // draft's next turn, but commands of this one are not pulled out from under them.
  const inFlight = await db.$queryRaw<unknown[]>`
    select 1 from agent_backend_runs r join messages m on m.id = r.message_id
     where r.binding_id = ${draft.agent_workspace_binding_id}::uuid and m.status in ('pending', 'running', 'paused') limit 1`;
  await retireBinding(db, workspaces, draft.agent_workspace_binding_id, 'build_draft_lifecycle', { keepFiles: inFlight.length > 0 });
  return true;
}
