/**
 * The Temporal floor's workflow (bundled for the bench's own worker, never for the product's): the shape of
 * a turn with none of its work — one local activity where agentTurn runs prepareTurn, then one activity
 * where it runs runAgent. What the floor costs is what any turn workflow of this shape costs on that server.
 *
 * Workflow code: deterministic, no Node modules (the Temporal bundler refuses them).
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import { AGENT_RUN_OPTIONS, TURN_STEP_OPTIONS } from '../workflows/turn-activity-options.js';

export interface FloorActivities {
  /** Stands for prepareTurn: returns at once. */
  floorPrepare(input: { id: string }): Promise<void>;
  /** Stands for runAgent: notes when it started (the floor's "first token") and returns. */
  floorRun(input: { id: string }): Promise<void>;
}

// agentTurn's own options: they go into the scheduling commands, so they are part of the shape.
const steps = proxyLocalActivities<FloorActivities>(TURN_STEP_OPTIONS);
const agent = proxyActivities<FloorActivities>(AGENT_RUN_OPTIONS);

export async function floorTurn(input: { id: string }): Promise<void> {
  await steps.floorPrepare(input);
  await agent.floorRun(input);
}
