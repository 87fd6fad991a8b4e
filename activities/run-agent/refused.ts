/**
 * A run the backend refused to create (a 4xx of POST /runs: an invalid composition, an unknown or unavailable
 * module, a snapshot of another topology; activities/backend-refusal.ts). Nothing ran, so there is nothing to consume:
 * the failure commits through the same terminal path as a `run_failed` (message, its `error` event, the
 * conversation's lock, `terminal_type` that makes a retried attempt return the same outcome), and the
 * activity completes with `failed` instead of throwing — one attempt, no retries, the error within a second.
 */
import { emptyUsage, type CreateRunRequest } from '../../core/protocol/run.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { backendRefusal } from '../backend-refusal.js';
import type { TurnErrorDetails } from '../errors.js';
import { errorEvents } from '../final-events.js';
import { usageColumns } from '../ledger-usage.js';
import type { RunAgentOutcome, RunScope } from './scope.js';

export type CreateRunResult = { run_id: string } | { refused: TurnErrorDetails };

/** Creates the run; a refusal is returned, every other failure (transport, 5xx) thrown for the activity to retry. */
export async function createRunOrRefusal(backend: Pick<AgentBackendClient, 'createRun'>, req: CreateRunRequest): Promise<CreateRunResult> {
  try {
    return await backend.createRun(req);
  } catch (err) {
    const refused = backendRefusal(err);
    if (refused) return { refused };
    throw err;
  }
}

export async function refuseRun(scope: RunScope, err: TurnErrorDetails): Promise<RunAgentOutcome> {
  const { committer, msg, log } = scope;
  log.warn({ code: err.code, status: err.status, error: err.message }, 'agent backend refused the run');
  await committer.commitTerminal(null, 'run_failed', async (tx) => {
    // As for a run_failed (terminal.ts): the backend's own words beside the client's code and message.
    const agentFailure = { error_type: null, reason: 'run_refused', error: err.message, code: err.code, backend_run_id: null };
    const metadata = { ...((msg.metadata ?? {}) as Record<string, unknown>), agent_failure: agentFailure };
    // Nothing ran, nothing was billed: zero usage, on the message as in the error event.
    const usage = emptyUsage();
    await tx.message.update({
      where: { id: msg.id },
      data: { status: 'failed', error: err.message, error_code: err.code, metadata, ...usageColumns(usage) },
    });
    return errorEvents(msg, err, usage);
  });
  return { status: 'failed', errorCode: err.code };
}
