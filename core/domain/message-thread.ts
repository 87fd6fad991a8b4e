/**
 * Threads (issue 35 item 2, Dify's parent_message_id): each message names the message it follows. A regenerated
 * answer is a sibling under the same parent; a conversation is a tree and its history is one branch of it.
 * Stored values: a message id; UUID_NIL for a thread's root; null only on rows older than threads, read as linear (the
 * conversation's previous message by time), so conversations started before keep their history whole.
 * (docs/ARCHITECTURE.md "Threads, regenerate and fork")
 */
import type { Prisma } from '../platform/db.js';

/** Dify's UUID_NIL: "no parent". Stored for a thread's root; accepted from clients to regenerate the first message. */
export const UUID_NIL = '00000000-0000-0000-0000-000000000000';

export interface ThreadNode {
  id: string;
  parent_message_id: string | null;
  created_at: Date;
}

type Tx = Pick<Prisma.TransactionClient, 'message'>;

/** Newest first, as every walk below wants them (ties by id, like the history pages). */
const NEWEST_FIRST = [{ created_at: 'desc' as const }, { id: 'desc' as const }];

/** The conversation's messages as thread nodes, newest first; a rolled-back turn (multitask `rollback`) is none. */
export async function threadNodes(db: Tx, conversationId: string): Promise<ThreadNode[]> {
  return db.message.findMany({
    where: { conversation_id: conversationId, rolled_back_at: null },
    select: { id: true, parent_message_id: true, created_at: true },
    orderBy: NEWEST_FIRST,
  });
}

/**
 * The parent of each node as the thread reads it: the stored one, none for UUID_NIL, and for a legacy row (null) the
 * next older message of the conversation. Nodes newest first.
 */
export function effectiveParents(nodes: readonly ThreadNode[]): Map<string, string | null> {
  const out = new Map<string, string | null>();
  nodes.forEach((n, i) => {
    const p = n.parent_message_id;
    out.set(n.id, p === UUID_NIL ? null : (p ?? nodes[i + 1]?.id ?? null));
  });
  return out;
}

/** The branch ending at `leafId`, oldest first (the leaf included). */
export function threadTo(nodes: readonly ThreadNode[], leafId: string): string[] {
  const parents = effectiveParents(nodes);
  const out: string[] = [];
  const seen = new Set<string>();
  for (let id: string | null | undefined = leafId; id && parents.has(id) && !seen.has(id); id = parents.get(id)) {
    seen.add(id);
    out.push(id);
  }
  return out.reverse();
}

/** The newest message at or below `id` (the leaf a branch switch shows): the branch through `id` that was written last. */
export function newestLeafBelow(nodes: readonly ThreadNode[], id: string): string {
  const parents = effectiveParents(nodes);
  // Newest first: the first node whose ancestry reaches `id` is the newest descendant.
  for (const n of nodes) {
    for (let cur: string | null | undefined = n.id; cur; cur = parents.get(cur)) {
      if (cur === id) return n.id;
    }
  }
  return id;
}

/** Children of each message (by effective parent, oldest first); the root's siblings are under `null`. */
export function childrenOf(nodes: readonly ThreadNode[]): Map<string | null, string[]> {
  const parents = effectiveParents(nodes);
  const out = new Map<string | null, string[]>();
  for (const n of [...nodes].reverse()) {
    const p = parents.get(n.id) ?? null;
    out.set(p, [...(out.get(p) ?? []), n.id]);
  }
  return out;
}
