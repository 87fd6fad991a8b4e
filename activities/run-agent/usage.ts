/**
 * What a finished run leaves on the message (usage, prices, and the caller's own fields: status, answer, …) in one
 * update, and on its binding and the message's own row (the session snapshot, both in one statement). Each statement
 * is a round trip inside the terminal transaction, which the client's `message_end` waits for. A terminal without usage
 * (the reaper's `backend_restarted`, a stop the backend never confirmed) takes the run's ledger rows instead
 * (activities/ledger-usage.ts), read in the same transaction: the message shows what was billed.
 */
import type { Prisma } from '../../core/platform/db.js';
import type { SessionSnapshot, Usage } from '../../core/protocol/run.js';
import { saveMessageSnapshot } from '../../core/domain/session-snapshots.js';
import { ledgerUsage, usageColumns } from '../ledger-usage.js';
import type { Tx } from './commit.js';
import type { RunScope } from './scope.js';

/** Saves usage (the terminal's, else the ledger's for `backendRunId`) and snapshot; returns the usage saved. */
export async function saveUsageAndSnapshot(
  scope: RunScope,
  tx: Tx,
  usage: Usage | null | undefined,
  snapshot: SessionSnapshot | null | undefined,
  message: Prisma.MessageUpdateInput,
  backendRunId?: string | null,
  /** The deferred tool call the snapshot leaves open (the ask_human pause). */
  pendingToolCallId?: string | null,
): Promise<Usage> {
  const saved = usage ?? (await ledgerUsage(tx, backendRunId ?? scope.run.backend_run_id));
  await tx.message.update({ where: { id: scope.msg.id }, data: { ...message, ...usageColumns(saved) } });
  // A null snapshot leaves the stored one untouched (docs/seeds/001).
  if (snapshot && scope.bindingId) {
    // The binding's current session and, per message, for a regenerate or a fork from here: one statement
    // (core/domain/session-snapshots.ts).
    await saveMessageSnapshot(tx, {
      asBindingSession: true,
      messageId: scope.msg.id,
      conversationId: scope.msg.conversation_id,
      bindingId: scope.bindingId,
      snapshot,
      pendingToolCallId,
      perBranch: scope.deps.config.SESSION_SNAPSHOTS_PER_BRANCH,
    });
  }
  return saved;
}
