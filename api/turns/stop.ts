/**
 * Stopping a turn (docs/seeds/001 `_cancel_run`), shared by the service API's stop route and the console's
 * debugger stop: the durable workflow cancel through the outbox, then the fast-path backend cancel.
 */
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { enqueueOutbox, type OutboxDispatcher } from '../../core/domain/outbox.js';
import { stopQueuedMessage } from '../../activities/conversation-queue.js';

export interface StopDeps {
  db: Db;
  backend: Pick<AgentBackendClient, 'cancelRun'>;
  outbox: OutboxDispatcher;
  logger: Logger;
}

export async function requestStop(deps: StopDeps, msg: { id: string; workflow_id: string; status?: string }): Promise<void> {
  // A message still waiting in its conversation's queue (multitask strategies) has no workflow yet: it just ends
  // (claimed meanwhile: its workflow is being started, and the cancel below reaches it).
  if (msg.status === 'queued' && (await deps.db.$transaction((tx) => stopQueuedMessage(tx, msg.id)))) return;
  // First the durable request: the workflow cancel goes through the outbox (written before we answer,
  // delivered now or, if Temporal is down, by any api/worker process once it is back; cancelling twice,
  // or a finished workflow, is harmless) ...
  await deps.outbox.deliverNow(await enqueueOutbox(deps.db, { kind: 'cancel', workflowId: msg.workflow_id }));
  await cancelRunNow(deps, msg.id);
}

/**
 * The fast path of a stop: the backend stops the model now instead of at the activity's next heartbeat. runAgent
 * records the run_cancelled either way; a failure here only costs latency.
 */
export async function cancelRunNow(deps: Omit<StopDeps, 'outbox'>, messageId: string): Promise<void> {
  const run = await deps.db.agentBackendRun.findUnique({ where: { message_id: messageId } });
  if (run?.backend_run_id && !run.terminal_type) {
    await deps.backend.cancelRun(run.backend_run_id, { reason: 'user_stop', message: 'Stopped by the user.' }).catch((err: Error) => {
      deps.logger.warn({ err: err.message, message_id: messageId }, 'fast-path backend cancel failed');
    });
  }
}
