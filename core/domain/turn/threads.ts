/**
 * A new message's place in its conversation's thread (issue 35 item 2, Dify's parent_message_id), decided where the
 * turn's rows are written, under the conversation's turn lock. Without a parent it follows the newest message (Dify's
 * service API, and every client before threads). With a parent other than the newest it starts a branch — a
 * regenerate when the query is the one answered under that parent — and the binding's session is moved to the
 * session after that parent (its per-message snapshot), so the turn's model history is the thread up to it and the
 * agent turn itself needs no change. (docs/ARCHITECTURE.md "Threads, regenerate and fork")
 */
import { Prisma } from '../../platform/db.js';
import { CodedError } from '../../protocol/error-codes.js';
import { UUID_NIL } from '../message-thread.js';
import { sessionAfter, type SessionAt } from '../session-snapshots.js';

type Tx = Prisma.TransactionClient;

const ENDED = new Set(['succeeded', 'failed', 'stopped', 'paused']);

/**
 * The parent to store on a new message (UUID_NIL for a thread's root). `requested`: the request's parent_message_id
 * (absent, null or '' = follow the newest; UUID_NIL = a new root, i.e. regenerate the first message).
 */
export async function placeInThread(
  tx: Tx,
  c: { conversationId: string; isNew: boolean; requested: string | null | undefined },
): Promise<string> {
  const requested = c.requested || null;
  if (c.isNew) {
    if (requested && requested !== UUID_NIL) throw parentNotFound();
    return UUID_NIL;
  }
  const newest = await tx.message.findFirst({
    where: { conversation_id: c.conversationId },
    orderBy: [{ created_at: 'desc' }, { id: 'desc' }],
    select: { id: true },
  });
  if (!requested || requested === newest?.id) return newest?.id ?? UUID_NIL;
  let parentId: string | null = null;
  if (requested !== UUID_NIL) {
    const parent = await tx.message.findFirst({
      where: { id: requested, conversation_id: c.conversationId },
      select: { id: true, status: true },
    });
    if (!parent) throw parentNotFound();
    if (!ENDED.has(parent.status))
      throw new CodedError('parent_message_not_finished', 'The parent message has not finished yet; wait for it to end.');
    parentId = parent.id;
  }
  const conv = await tx.conversation.findUniqueOrThrow({ where: { id: c.conversationId }, select: { agent_workspace_binding_id: true } });
  const bindingId = conv.agent_workspace_binding_id;
  await moveSession(tx, bindingId, await sessionOrRefuse(tx, c.conversationId, bindingId, parentId));
  return parentId ?? UUID_NIL;
}

/** The session after `messageId`, or the 409 saying why a turn (or a fork: api/service/fork.ts) cannot start from there. */
export async function sessionOrRefuse(tx: Tx, conversationId: string, bindingId: string | null, messageId: string | null) {
  const at = await sessionAfter(tx, conversationId, bindingId, messageId);
  if (at.kind === 'pruned')
    throw new CodedError(
      'session_snapshot_pruned',
      'The agent session after that message is no longer kept (SESSION_SNAPSHOTS_PER_BRANCH); branch from a later message.',
      { message_id: at.messageId },
    );
  if (at.kind === 'unavailable')
    throw new CodedError(
      'session_snapshot_unavailable',
      'That message is older than per-message session snapshots; the conversation can only continue from its newest message.',
      { message_id: at.messageId },
    );
  return at;
}

/**
 * Puts `at` on the binding as its session: the snapshot, and the ask_human call it leaves open (closed as
 * `unavailable` by the next turn, like a form stopped while waiting). No binding yet: nothing to move.
 */
export async function moveSession(tx: Tx, bindingId: string | null, at: Extract<SessionAt, { kind: 'snapshot' }>): Promise<void> {
  if (!bindingId) return;
  const form =
    at.pendingToolCallId && at.messageId
      ? await tx.humanInputForm.findUnique({ where: { message_id: at.messageId }, select: { id: true } })
      : null;
  const pending =
    form && at.pendingToolCallId
      ? { pending_form_id: form.id, pending_tool_call_id: at.pendingToolCallId, pending_message_id: at.messageId }
      : { pending_form_id: null, pending_tool_call_id: null, pending_message_id: null };
  await tx.agentWorkspaceBinding.update({
    where: { id: bindingId },
    data: { session_snapshot: at.snapshot === null ? Prisma.DbNull : (at.snapshot as unknown as Prisma.InputJsonValue), ...pending },
  });
}

const parentNotFound = () => new CodedError('parent_message_not_exists', 'Parent Message Not Exists.');
