/**
 * The Temporal floor's workflow (bundled for the bench's own worker, never for the product's): the shape of
 * a turn with none of its work — one local activity where agentTurn runs prepareTurn, then one activity
 * where it runs runAgent. What the floor costs is what any turn workflow of this shape costs on that server.
 *
 * Workflow code: deterministic, no Node modules (the Temporal bundler refuses them).
 */
import { ActivityCancellationType, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';

export interface FloorActivities {
  /** Stands for prepareTurn: returns at once. */
  floorPrepare(input: { id: string }): Promise<void>;
  /** Stands for runAgent: notes when it started (the floor's "first token") and returns. */
  floorRun(input: { id: string }): Promise<void>;
}

// The same timeouts as agentTurn's proxies: they go into the scheduling commands, so they are part of the shape.
const steps = proxyLocalActivities<FloorActivities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '5 minutes',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds' },
});

const agent = proxyActivities<FloorActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '5 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '300 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 50 },
});

export async function floorTurn(input: { id: string }): Promise<void> {
  await steps.floorPrepare(input);
  await agent.floorRun(input);
}
