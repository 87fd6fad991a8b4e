/**
 * Workflow interceptors that count turns (bundled into the workflow code by the worker, `interceptors.workflowModules`;
 * not exported by workflows/index.ts, and they add no command to history, so replay is unaffected). The counts leave the
 * sandbox through the `turnMetrics` sink, which the worker declares with `callDuringReplay: false`: a replayed
 * turn is not counted twice. Imports only what the workflow sandbox allows.
 */
import {
  ApplicationFailure,
  isCancellation,
  proxySinks,
  workflowInfo,
  type Sinks,
  type WorkflowInterceptorsFactory,
} from '@temporalio/workflow';
import { AGENT_TURN_WORKFLOW } from './definitions.js';

export interface TurnMetricsSinks extends Sinks {
  turnMetrics: {
    /** The turn workflow ended: succeeded, failed (with its client code), stopped, answered_by_guard, … */
    ended(outcome: string, code: string | null): void;
    /** runAgent paused the turn for ask_human. */
    paused(): void;
  };
}

const { turnMetrics } = proxySinks<TurnMetricsSinks>();

export const interceptors: WorkflowInterceptorsFactory = () => {
  if (workflowInfo().workflowType !== AGENT_TURN_WORKFLOW) return {};
  return {
    inbound: [
      {
        async execute(input, next) {
          try {
            const result = (await next(input)) as { status?: string; errorCode?: string } | undefined;
            turnMetrics.ended(result?.status ?? 'unknown', result?.errorCode ?? null);
            return result;
          } catch (err) {
            // A failed turn ends as a failed workflow once its outcome is stored (agent-turn.ts turnFailed): its
            // details carry the outcome and the client code, counted as the completed result used to be.
            const d =
              err instanceof ApplicationFailure ? (err.details?.[0] as { status?: string; errorCode?: string } | undefined) : undefined;
            if (d?.status === 'failed') turnMetrics.ended('failed', d.errorCode ?? null);
            else turnMetrics.ended(isCancellation(err) ? 'stopped' : 'workflow_failed', null);
            throw err;
          }
        },
      },
    ],
    outbound: [
      {
        async scheduleActivity(input, next) {
          const result = await next(input);
          if (input.activityType === 'runAgent' && (result as { status?: string } | undefined)?.status === 'paused') turnMetrics.paused();
          return result;
        },
      },
    ],
  };
};
