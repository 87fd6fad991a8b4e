/**
 * Per-message session snapshots (issue 35 item 2): beside the binding's latest, each turn's terminal snapshot is kept on
 * `message_session_snapshots`, so a regenerate or a fork can start from the session as it was after any message.
 * Bounded by a rule (docs/ARCHITECTURE.md "Threads, regenerate and fork"): the last SESSION_SNAPSHOTS_PER_BRANCH messages
 * of each branch and every branch point keep theirs; the others are pruned (the row stays, marked, without snapshot),
 * and pruning runs once a conversation holds more than twice that many live snapshots.
 */
import { Prisma } from '../platform/db.js';
import type { SessionSnapshot } from '../protocol/run.js';
import { childrenOf, effectiveParents, threadNodes, type ThreadNode } from './message-thread.js';

type Tx = Prisma.TransactionClient;

/**
 * Records the snapshot `messageId`'s turn ended with (idempotent: a replayed terminal writes the same row), and prunes
 * the conversation when it holds too many. Runs inside the terminal's transaction, as one statement in the common case.
 * `asBindingSession`: the same statement also makes it the binding's current session (`session_snapshot`), which the
 * terminal wrote as a statement of its own before (a round trip inside the transaction `message_end` waits for).
 */
export async function saveMessageSnapshot(
  tx: Tx,
  s: {
    messageId: string;
    conversationId: string;
    bindingId: string;
    snapshot: SessionSnapshot;
    pendingToolCallId?: string | null;
    perBranch: number;
    asBindingSession?: boolean;
  },
): Promise<void> {
  const json = JSON.stringify(s.snapshot);
  const [row] = await tx.$queryRaw<{ live: number; bound: number }[]>`
    with bound as (
      update agent_workspace_bindings set session_snapshot = ${json}::jsonb, updated_at = now()
       where id = ${s.bindingId}::uuid and ${s.asBindingSession ?? false}::boolean
      returning id
    ), saved as (
      insert into message_session_snapshots (message_id, conversation_id, binding_id, snapshot, size_bytes, pending_tool_call_id, updated_at)
      values (${s.messageId}::uuid, ${s.conversationId}::uuid, ${s.bindingId}::uuid, ${json}::jsonb, ${Buffer.byteLength(json)}::int,
              ${s.pendingToolCallId ?? null}, now())
      on conflict (message_id) do update
        set snapshot = excluded.snapshot, size_bytes = excluded.size_bytes, binding_id = excluded.binding_id,
            pending_tool_call_id = excluded.pending_tool_call_id, pruned_at = null, updated_at = now()
      returning message_id
    )
    select (select count(*)::int from message_session_snapshots
             where conversation_id = ${s.conversationId}::uuid and snapshot is not null and message_id <> ${s.messageId}::uuid) + 1 as live,
           (select count(*)::int from bound) as bound`;
  // As Prisma's update of the binding did: a binding that is gone fails the terminal (and rolls it back).
  if (s.asBindingSession && row?.bound !== 1) throw new Error(`session snapshot: binding ${s.bindingId} not found`);
  if ((row?.live ?? 0) > 2 * s.perBranch) await pruneSessionSnapshots(tx, s.conversationId, s.perBranch);
}

/** Which messages keep their snapshot: the last `perBranch` of every branch (leaf upwards), and every branch point. */
export function snapshotsToKeep(nodes: readonly ThreadNode[], perBranch: number): Set<string> {
  const parents = effectiveParents(nodes);
  const children = childrenOf(nodes);
  const keep = new Set<string>();
  for (const [parent, kids] of children) if (parent && kids.length > 1) keep.add(parent);
  for (const n of nodes) {
    if (children.has(n.id)) continue; // not a leaf
    let id: string | null | undefined = n.id;
    for (let i = 0; id && i < perBranch; i++, id = parents.get(id)) keep.add(id);
  }
  return keep;
}

/** Removes the snapshots the rule does not keep; returns how many it removed. */
export async function pruneSessionSnapshots(tx: Tx, conversationId: string, perBranch: number): Promise<number> {
  const keep = [...snapshotsToKeep(await threadNodes(tx, conversationId), perBranch)];
  const n = await tx.messageSessionSnapshot.updateMany({
    where: { conversation_id: conversationId, snapshot: { not: Prisma.DbNull }, message_id: { notIn: keep } },
    data: { snapshot: Prisma.DbNull, pruned_at: new Date() },
  });
  return n.count;
}

/** The session after a message, as a turn following it must start: its snapshot and the call it leaves open. */
export type SessionAt =
  | { kind: 'snapshot'; snapshot: SessionSnapshot | null; pendingToolCallId: string | null; messageId: string | null }
  /** The snapshot this point needs was pruned by the rule above. */
  | { kind: 'pruned'; messageId: string }
  /** No record says what the session was there: a message older than per-message snapshots. */
  | { kind: 'unavailable'; messageId: string };

/**
 * The session after `messageId` in its thread: the snapshot of the nearest message at or above it that has one (a turn
 * that ended without a snapshot left the session as it was, docs/seeds/000). Reaching the thread's root without one is
 * a fresh session; a row of another binding (the session was replaced: a new incarnation started with no history) is
 * one too. `messageId` null: before the root.
 */
export async function sessionAfter(tx: Tx, conversationId: string, bindingId: string | null, messageId: string | null): Promise<SessionAt> {
  const fresh: SessionAt = { kind: 'snapshot', snapshot: null, pendingToolCallId: null, messageId: null };
  if (!messageId) return fresh;
  const [nodes, rows] = await Promise.all([
    threadNodes(tx, conversationId),
    tx.messageSessionSnapshot.findMany({ where: { conversation_id: conversationId } }),
  ]);
  const parents = effectiveParents(nodes);
  const byMessage = new Map(rows.map((r) => [r.message_id, r]));
  const stored = new Map(nodes.map((n) => [n.id, n.parent_message_id]));
  for (let id: string | null | undefined = messageId; id; id = parents.get(id)) {
    const row = byMessage.get(id);
    if (row) {
      if (bindingId && row.binding_id !== bindingId) return fresh;
      if (row.pruned_at || row.snapshot === null) return { kind: 'pruned', messageId: id };
      return {
        kind: 'snapshot',
        snapshot: row.snapshot as unknown as SessionSnapshot,
        pendingToolCallId: row.pending_tool_call_id,
        messageId: id,
      };
    }
    // A row older than threads kept no snapshot of its own: what the session was after it is not recorded.
    if (stored.get(id) === null) return { kind: 'unavailable', messageId: id };
  }
  return fresh;
}
