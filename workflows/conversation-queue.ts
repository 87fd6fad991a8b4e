/**
 * conversationQueue: a conversation's coordinator for queued messages (multitask strategies, docs/ARCHITECTURE.md
 * "Multitask strategies"). One per conversation (`conversation-queue-<id>`), started or woken by signal-with-start
 * when a message is queued. The queue is rows in PostgreSQL (status `queued`, `queue_position`); this workflow only
 * turns them, one at a time and in order, into ordinary `agentTurn` children under their usual ids — the start is a
 * command in history, so a turn is never started twice whatever retries, replays or worker kills happen. It waits
 * for each child (stop, interrupt and rollback cancel the child directly, by its own id), then claims the next. A
 * stop that reached a claimed message before its child existed (its cancel found no workflow) is looked up once the
 * child has started, and delivered then (`patched('queue-stop-before-start')`).
 */
import {
  ChildWorkflowFailure,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { ConversationQueueActivities } from '../activities/conversation-queue.js';
import { agentTurn } from './agent-turn.js';
import { workflowIdForMessage } from './definitions.js';
import type { ConversationQueueInput } from '../core/protocol/workflow-contract.js';
import { turnQueuedSignal } from './multitask-definitions.js';
import { turnStartSearchAttributes } from '../core/protocol/workflow-contract.js';

/** The claim waits (heartbeating) while another turn holds the conversation: as long as a turn may run, and retried. */
const queue = proxyActivities<ConversationQueueActivities>({
  startToCloseTimeout: '3 hours',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** The stop look-up after a child's start: one indexed read. */
const check = proxyActivities<ConversationQueueActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** Turns per run before continue-as-new keeps the history short (a turn adds about ten events). */
const TURNS_PER_RUN = 100;
/** An empty queue keeps the coordinator a little, so a burst of follow-ups does not start one run per message. */
const LINGER = '10 seconds';

export async function conversationQueue(input: ConversationQueueInput): Promise<void> {
  let wakes = 0;
  setHandler(turnQueuedSignal, () => void wakes++);
  for (let turns = 0; turns < TURNS_PER_RUN && !workflowInfo().continueAsNewSuggested;) {
    const seen = wakes;
    const next = await queue.claimQueuedTurn({ conversationId: input.conversationId });
    if (next.kind === 'empty') {
      // A message queued meanwhile signals (handled before this condition is checked), else the run ends; a later
      // signal-with-start begins a new one, and the sweeper wakes a conversation whose queued messages wait unseen.
      if (await condition(() => wakes > seen, LINGER)) continue;
      return;
    }
    const turn = next.input;
    turns++;
    const workflowId = workflowIdForMessage(turn.messageId);
    try {
      // startChild + result() are the commands executeChild issued (histories of either replay).
      const child = await startChild(agentTurn, {
        workflowId,
        args: [turn],
        // Terminating the coordinator must not kill a turn; a closed turn's id is never run again.
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: turnStartSearchAttributes(turn),
        staticSummary: next.summary,
        staticDetails: next.details,
      });
      // A stop (or an interrupt/rollback) between the claim and this start was a cancel of a workflow that did not
      // exist yet: Temporal answered not-found and the outbox counted it delivered. Its row says it was asked for; the
      // cancel is sent again now that the turn exists (a second cancel of a turn already cancelled is a no-op).
      if (patched('queue-stop-before-start') && (await check.stopRequestedBeforeStart({ workflowId }))) {
        await getExternalWorkflowHandle(workflowId)
          .cancel()
          .catch(() => undefined);
      }
      await child.result();
    } catch (err) {
      // Started by an earlier run of this coordinator (terminated, then woken again): its turn ends the message and
      // frees the conversation by itself; the next claim waits for that.
      if (err instanceof WorkflowExecutionAlreadyStartedError) await sleep('1 second');
      // Failed or cancelled (a stop, an interrupt, a rollback): the turn's own cleanup ended its message.
      else if (!(err instanceof ChildWorkflowFailure)) throw err;
    }
  }
  await continueAsNew<typeof conversationQueue>(input);
}
