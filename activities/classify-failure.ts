/**
 * A failed agent run as the client sees it (docs/seeds/001 `_agent_backend_failure_to_exception`): the run's
 * `error_type` wins, then its `reason`; anything unknown is a `completion_request_error`.
 */
import { redactSecrets } from '../core/domain/llm/redact.js';
import type { ErrorCode } from '../core/protocol/error-codes.js';
import type { TurnErrorDetails } from './errors.js';

export const BINDING_LOST_MESSAGE = 'The retained agent working environment is no longer available.';

/** What a `run_failed` event says about its failure (the fields the mapping reads). */
export interface RunFailure {
  error: string;
  error_type?: string | null;
  reason?: string | null;
}

const BY_ERROR_TYPE: Readonly<Record<string, { code: ErrorCode; status: number }>> = {
  agent_run_limit_exceeded: { code: 'agent_run_limit_exceeded', status: 400 },
  // Issue 27: the backend's runtime layer was refused the workspace it named (the api's authorization said why).
  workspace_not_authorized: { code: 'workspace_not_authorized', status: 403 },
};

const BY_REASON: Readonly<Record<string, { code: ErrorCode; status: number; message?: string }>> = {
  InvokeRateLimitError: { code: 'rate_limit_error', status: 429 },
  InvokeAuthorizationError: { code: 'completion_request_error', status: 400 },
  InvokeBadRequestError: { code: 'completion_request_error', status: 400 },
  InvokeConnectionError: { code: 'completion_request_error', status: 400 },
  InvokeServerUnavailableError: { code: 'completion_request_error', status: 400 },
  InvokeError: { code: 'completion_request_error', status: 400 },
  agent_llm_quota_exceeded: { code: 'provider_quota_exceeded', status: 400 },
  // What the gateway says a user can act on (issue 29; core/domain/llm/errors.ts InvokeErrorReason).
  provider_auth_failed: { code: 'provider_auth_failed', status: 400 },
  provider_rate_limited: { code: 'provider_rate_limited', status: 429 },
  context_window_exceeded: { code: 'context_window_exceeded', status: 400 },
  content_filtered: { code: 'content_filtered', status: 400 },
  provider_timeout: { code: 'provider_timeout', status: 504 },
  provider_overloaded: { code: 'provider_overloaded', status: 503 },
  provider_billing_error: { code: 'provider_billing_error', status: 400 },
  provider_model_not_found: { code: 'provider_model_not_found', status: 400 },
  provider_unreachable: { code: 'provider_unreachable', status: 502 },
  provider_stream_interrupted: { code: 'provider_stream_interrupted', status: 502 },
  run_timeout: { code: 'agent_run_timeout', status: 504 },
  // Seed 001: the backend lost the binding's working environment (its workspace is gone).
  binding_lost: { code: 'completion_request_error', status: 400, message: BINDING_LOST_MESSAGE },
};

const FALLBACK = { code: 'completion_request_error', status: 400 } as const;

function lookup(table: Readonly<Record<string, { code: ErrorCode; status: number; message?: string }>>, key: string | null | undefined) {
  return key && Object.hasOwn(table, key) ? table[key] : undefined;
}

export function classifyFailure(failure: RunFailure): TurnErrorDetails {
  const known = lookup(BY_ERROR_TYPE, failure.error_type) ?? lookup(BY_REASON, failure.reason);
  // What is stored (messages.error, message_events) and shown: never a URL credential or key (issue 17 L1).
  const error = redactSecrets(failure.error);
  if (known) return { code: known.code, status: known.status, message: known.message ?? error };
  return { ...FALLBACK, message: error || 'The agent run failed.' };
}
