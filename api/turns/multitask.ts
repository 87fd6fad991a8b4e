/**
 * What the api owes once a message was queued behind its conversation's turn (core/domain/turn/queue.ts queues it,
 * inside createTurnRecords' transaction): the stop of an interrupted turn delivered now, the queue woken.
 */
import type { Client } from '@temporalio/client';
import type { Config } from '../../core/platform/config.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import { wakeConversationQueue, type QueuedTurn } from '../../core/domain/turn/queue.js';
import { cancelRunNow } from './stop.js';

/** After the queued message committed: deliver the stop of the turn it interrupts (and cancel its run now), wake the queue. */
export async function afterQueued(
  deps: {
    db: Db;
    temporal: Client;
    config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>;
    logger: Logger;
    outbox?: OutboxDispatcher;
    backend?: Pick<AgentBackendClient, 'cancelRun'>;
  },
  conv: { conversationId: string; tenantId: string; appId: string; messageId: string },
  queued: QueuedTurn,
): Promise<void> {
  if (queued.stop) {
    // Without a dispatcher here (the console) the outbox row is delivered by any process's dispatcher after its lease.
    if (deps.outbox) await deps.outbox.deliverNow(queued.stop.entry);
    if (deps.backend) await cancelRunNow({ db: deps.db, backend: deps.backend, logger: deps.logger }, queued.stop.messageId);
  }
  await wakeConversationQueue(deps, conv);
  deps.logger.info(
    {
      tenant_id: conv.tenantId,
      app_id: conv.appId,
      conversation_id: conv.conversationId,
      message_id: conv.messageId,
      strategy: queued.strategy,
      position: queued.position,
      stopped_message_id: queued.stop?.messageId ?? null,
    },
    'turn queued',
  );
}
