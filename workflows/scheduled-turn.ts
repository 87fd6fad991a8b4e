/**
 * scheduledTurn: one run of an app's schedule (docs/ARCHITECTURE.md "Scheduled turns and webhooks"). One activity
 * creates the turn's rows through startTurn's own code path (admission, end user, conversation lock, Message), under a
 * message id drawn here — uuid4() is recorded by replay, so a retried activity finds the rows its earlier attempt
 * committed instead of creating a second turn. The turn itself is an ordinary `agentTurn`, started as a child under
 * its usual id `agent-turn-<message id>`: the start is a command in this history (never issued twice), the child
 * outlives this workflow if it is terminated (ABANDON), and this workflow stays open as long as the turn does, so the
 * schedule's overlap policy sees a run in progress until its turn has ended.
 */
import {
  ApplicationFailure,
  ChildWorkflowFailure,
  ParentClosePolicy,
  executeChild,
  patched,
  proxyActivities,
  uuid4,
} from '@temporalio/workflow';
import type { AgentTurnResult } from './definitions.js';
import type { ScheduleActivities } from '../activities/scheduled-turn.js';
import { agentTurn } from './agent-turn.js';
import type { ScheduledTurnInput, ScheduledTurnResult } from './automation-definitions.js';
import { workflowIdForMessage } from './definitions.js';
import { turnStartSearchAttributes } from '../core/protocol/workflow-contract.js';

const steps = proxyActivities<ScheduleActivities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '5 minutes',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export async function scheduledTurn(input: ScheduledTurnInput): Promise<ScheduledTurnResult> {
  const messageId = uuid4();
  const started = await steps.startScheduledTurn({ scheduleId: input.scheduleId, messageId });
  if (started.kind === 'refused') {
    await steps.recordScheduleRun({ scheduleId: input.scheduleId, messageId: null, status: 'not_started', error: started.error });
    return { scheduleId: input.scheduleId, messageId: null, status: 'not_started' };
  }
  const turn = started.input;
  let result: Pick<AgentTurnResult, 'status' | 'errorCode'>;
  try {
    result = await executeChild(agentTurn, {
      workflowId: workflowIdForMessage(turn.messageId),
      args: [turn],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: turnStartSearchAttributes(turn),
      staticSummary: started.summary,
      staticDetails: started.details,
    });
  } catch (err) {
    // A failed turn ends as a failed workflow whose failure's type is its error code (workflows/agent-turn.ts): the
    // run's outcome to record, as its completed {status: 'failed'} was before. A stopped (cancelled) turn fails this
    // run as it always did. Patched: a run whose child failed before this change replays to its own failure.
    if (!(err instanceof ChildWorkflowFailure && err.cause instanceof ApplicationFailure) || !patched('scheduled-turn-failed-child'))
      throw err;
    result = { status: 'failed', errorCode: err.cause.type ?? 'internal_server_error' };
  }
  await steps.recordScheduleRun({
    scheduleId: input.scheduleId,
    messageId: turn.messageId,
    status: result.status,
    error: result.errorCode ?? null,
  });
  return { scheduleId: input.scheduleId, messageId: turn.messageId, status: result.status };
}
