/**
 * agentTurn: one conversation turn as a durable workflow (ARCHITECTURE "One turn").
 * The workflow decides; activities do all I/O and keep big data (snapshots, answers, thoughts) in
 * PostgreSQL, so history holds ids and small outcomes only. Stop is cancellation: cleanup runs in
 * non-cancellable scopes and the workflow then ends Cancelled.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  turnStateQuery,
  type AgentTurnInput,
  type AgentTurnResult,
  type TurnState,
} from './definitions.js';

/** Short, idempotent database steps. */
const steps = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 10 },
});

/** The agent run: long, heartbeating, cancellable, reattaches on retry. */
const agent = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '8 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '300 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 25 },
});

interface TurnErrorDetails {
  code: string;
  status: number;
  message: string;
}

/** Client-facing error of a failed step (turnFailure details), else a generic one. */
function errorDetails(err: unknown): TurnErrorDetails {
  let cur: unknown = err;
  while (cur && typeof cur === 'object') {
    if (cur instanceof ApplicationFailure && cur.details?.[0] && typeof cur.details[0] === 'object') {
      const d = cur.details[0] as Partial<TurnErrorDetails>;
      if (d.code && d.status && d.message) return { code: d.code, status: d.status, message: d.message };
    }
    cur = (cur as { cause?: unknown }).cause;
  }
  return { code: 'internal_server_error', status: 500, message: 'The agent turn failed unexpectedly.' };
}

export async function agentTurn(input: AgentTurnInput): Promise<AgentTurnResult> {
  const { messageId, conversationId } = input;
  const state: TurnState = { phase: 'resolving_config', messageId, pendingFormId: null, pendingFormToken: null };
  setHandler(turnStateQuery, () => state);
  // The Temporal UI shows this under "current details": ops see where a turn is without a query.
  const enter = (phase: TurnState['phase']) => {
    state.phase = phase;
    setCurrentDetails(`phase: ${phase}`);
  };
  enter('resolving_config');

  try {
    const resolved = await steps.resolveConfig({ messageId });
    enter('loading_binding');
    const { bindingId } = await steps.loadOrCreateBinding({ messageId, resolved });
    enter('building_request');
    await steps.buildRunRequest({ messageId, bindingId, resolved });
    enter('running_agent');
    const outcome = await agent.runAgent({ messageId });
    switch (outcome.status) {
      case 'succeeded':
        enter('completed');
        return { status: 'succeeded', messageId };
      case 'failed':
        enter('failed');
        return { status: 'failed', messageId, errorCode: outcome.errorCode };
      case 'paused':
        enter('completed');
        return { status: 'paused', messageId };
      case 'stopped':
        enter('stopped');
        return { status: 'stopped', messageId };
    }
  } catch (err) {
    if (isCancellation(err)) {
      enter('stopped');
      await CancellationScope.nonCancellable(() => steps.stopTurn({ messageId }));
      throw err;
    }
    const details = errorDetails(err);
    enter('failed');
    await CancellationScope.nonCancellable(() => steps.failTurn({ messageId, ...details }));
    return { status: 'failed', messageId, errorCode: details.code };
  } finally {
    await CancellationScope.nonCancellable(() => steps.releaseTurn({ conversationId, messageId }));
  }
}
