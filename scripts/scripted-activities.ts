/**
 * The turn workflow's activities with no database or backend behind them: every call is recorded and
 * runAgent's outcome per call is scripted. For tests of the workflow's own logic and for recording
 * histories (scripts/record-histories.ts). The database steps answer as on a fresh turn.
 */
import type { Activities, RunAgentOutcome } from '../activities/index.js';

export type ScriptedCall = { name: string; input: unknown };

export function scriptedActivities(runAgent: (call: number, input: { messageId: string }) => Promise<RunAgentOutcome> | RunAgentOutcome) {
  const calls: ScriptedCall[] = [];
  let runs = 0;
  const rec =
    (name: string, result: unknown = undefined) =>
    async (input: unknown) => {
      calls.push({ name, input });
      return result;
    };
  const activities = {
    prepareTurn: rec('prepareTurn', { guard: null }),
    runAgent: async (input: { messageId: string }) => {
      calls.push({ name: 'runAgent', input });
      return runAgent(runs++, input);
    },
    failTurn: rec('failTurn'),
    releaseTurn: rec('releaseTurn'),
    stopTurn: rec('stopTurn'),
    expireForm: rec('expireForm', { status: 'expired', resumeMessageId: null }),
    createTimeoutResume: rec('createTimeoutResume'),
    cancelPendingForm: rec('cancelPendingForm'),
  } as unknown as Activities;
  return { calls, activities };
}
