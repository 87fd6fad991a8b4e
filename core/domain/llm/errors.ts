/**
 * Provider failures, named after Dify's InvokeError subclasses. A provider throws `InvokeError`; the
 * inner API turns it into an error chunk `{code: <negative>, message, data: {error_type, message}}`.
 */
import type { ErrorCode } from '../../protocol/error-codes.js';
import { InvokeErrorType } from '../../protocol/inner-llm.js';

export type InvokeErrorKind = (typeof InvokeErrorType.options)[number];

/** Negative chunk codes, one per kind (the HTTP status a client would associate with it, negated). */
export const INVOKE_ERROR_CODES: Record<InvokeErrorKind, number> = {
  InvokeBadRequestError: -400,
  InvokeAuthorizationError: -401,
  InvokeRateLimitError: -429,
  InvokeError: -500,
  InvokeConnectionError: -502,
  InvokeServerUnavailableError: -503,
};

/**
 * What a user can act on (docs/models.md), carried beside the Dify kind as the error chunk's `data.code`:
 * fix the credentials, wait, shorten the conversation, rephrase.
 */
export type InvokeErrorReason = Extract<
  ErrorCode,
  | 'provider_auth_failed'
  | 'provider_rate_limited'
  | 'context_window_exceeded'
  | 'content_filtered'
  | 'provider_timeout'
  | 'provider_overloaded'
  | 'provider_billing_error'
  | 'provider_model_not_found'
  | 'provider_unreachable'
  | 'provider_stream_interrupted'
>;

export class InvokeError extends Error {
  readonly errorType: InvokeErrorKind;
  readonly reason: InvokeErrorReason | undefined;
  /** The provider's Retry-After, ms (a 429 or 503), when it sent one. */
  readonly retryAfterMs: number | undefined;
  constructor(errorType: InvokeErrorKind, message: string, opts: { reason?: InvokeErrorReason; retryAfterMs?: number } = {}) {
    super(message);
    this.name = errorType;
    this.errorType = errorType;
    this.reason = opts.reason;
    this.retryAfterMs = opts.retryAfterMs;
  }
  get code(): number {
    return INVOKE_ERROR_CODES[this.errorType];
  }
}

export function isInvokeErrorKind(value: string): value is InvokeErrorKind {
  return (InvokeErrorType.options as readonly string[]).includes(value);
}

/** Any thrown value as an InvokeError (unknown failures become the generic `InvokeError`). */
export function toInvokeError(err: unknown): InvokeError {
  if (err instanceof InvokeError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new InvokeError('InvokeError', message || 'model invocation failed');
}
