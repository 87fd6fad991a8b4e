/** All activities of the turn workflow, built from injected dependencies. */
import type { ActivityDeps } from './deps.js';
import { createAskHumanActivities } from './ask-human.js';
import { createPrepareTurn } from './prepare/index.js';
import { createRunAgent } from './run-agent/index.js';
import { createFailTurn, createReleaseTurn, createStopTurn } from './turn-end.js';

export type { ActivityDeps } from './deps.js';
export type { ResolvedConfig } from './prepare/resolve-config.js';
export type { RunAgentOutcome } from './run-agent/index.js';

export function createActivities(deps: ActivityDeps) {
  return {
    // resolveConfig → inputGuards → loadOrCreateBinding → buildRunRequest (see prepare-turn.ts)
    prepareTurn: createPrepareTurn(deps),
    runAgent: createRunAgent(deps),
    failTurn: createFailTurn(deps),
    releaseTurn: createReleaseTurn(deps),
    stopTurn: createStopTurn(deps),
    ...createAskHumanActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
