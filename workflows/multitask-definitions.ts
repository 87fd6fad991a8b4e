/**
 * The signal of `conversationQueue` (issue 35, docs/ARCHITECTURE.md "Multitask strategies"). The queue's names, input,
 * id and strategies are the workflow contract's (core/protocol/workflow-contract.ts), shared by the api, the sweeper,
 * core/domain/turn/queue.ts and the workflow, so they cannot drift.
 */
import { defineSignal } from '@temporalio/workflow';
import { TURN_QUEUED_SIGNAL } from '../core/protocol/workflow-contract.js';

/** "A message was queued": wakes the coordinator; it reads what to run from the database. */
export const turnQueuedSignal = defineSignal<[]>(TURN_QUEUED_SIGNAL);
