/**
 * Which failures of POST /runs are worth retrying (issue 14 "fail fast"). The backend validates a run request
 * completely before any I/O (docs/PROTOCOL.md §2), so its 4xx is a verdict on the request: the same request
 * (the idempotency key pins it) gets the same answer on every retry. Such a refusal ends the turn at once with
 * the backend's code and message. Only what can heal retries: transport errors (refused, reset, timed out),
 * 5xx (including 503 while the backend's PostgreSQL is away), and the two "come back later" statuses 408/429.
 */
import { redactSecrets } from '../core/domain/llm/redact.js';
import { BackendHttpError } from '../core/protocol/backend-client.js';
import type { ErrorCode } from '../core/protocol/error-codes.js';
import type { TurnErrorDetails } from './errors.js';

const TRANSIENT_4XX: ReadonlySet<number> = new Set([408, 429]);

/**
 * Statuses that judge the request (a client of ours could make the same mistake) reach the client as they are.
 * Any other 4xx (401/403: the deployment's AGENT_BACKEND_TOKEN; 404/405: AGENT_BACKEND_URL) is the deployment's
 * fault, not the end user's: reported as 502 so a blocking client never reads "401" as its own key being wrong.
 */
const REQUEST_VERDICTS: ReadonlySet<number> = new Set([400, 409, 413, 422]);

/** The turn error of a POST /runs failure that must not be retried, or null for a failure that may heal. */
export function backendRefusal(err: unknown): TurnErrorDetails | null {
  if (!(err instanceof BackendHttpError)) return null;
  if (err.status < 400 || err.status >= 500 || TRANSIENT_4XX.has(err.status)) return null;
  const body = err.errorBody();
  const message = body?.message ? redactSecrets(body.message) : `The agent backend refused the run (HTTP ${err.status}).`;
  return {
    // The backend's own code (a registry code: they share core/protocol/error-codes.ts), passed on as it is.
    code: (body?.code as ErrorCode | undefined) ?? 'agent_run_refused',
    status: REQUEST_VERDICTS.has(err.status) ? err.status : 502,
    message,
  };
}
