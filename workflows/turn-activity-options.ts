/**
 * The activity options of a turn's workflow (workflows/agent-turn.ts), shared with the bench's Temporal floor
 * (bench/floor-workflows.ts): the timeouts go into the scheduling commands, so the floor has the turn's shape only
 * while both read them from here. Workflow code: deterministic, no Node modules.
 */
import { ActivityCancellationType, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';

/**
 * Short, idempotent database steps run as local activities: no task-queue round trip and a single marker
 * in history each (the durable path's first-token latency is dominated by round trips; bench/README.md).
 * They retry for as long as a PostgreSQL failover may take (bounded by time, not attempts: 10 attempts were
 * ~30 s, and a turn whose bookkeeping step gave up mid-outage failed or kept its conversation locked).
 * Retry options are not part of the replayed commands, so running turns pick this up without a patch.
 */
export const TURN_STEP_OPTIONS: LocalActivityOptions = {
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '5 minutes',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds' },
};

/** The agent run: long, heartbeating, cancellable, reattaches on retry. */
export const AGENT_RUN_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '5 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  // ~4 minutes of retries at the 5 s cap: a PostgreSQL failover (a minute) fails attempts fast, each reattaches.
  retry: { initialInterval: '300 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 50 },
};
