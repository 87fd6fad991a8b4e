/**
 * What a model provider's failure may show, to whom (issue 17 L1). A provider error can carry the provider's
 * URL with its credentials (`http://user:pass@host`), API keys, bearer tokens and the provider's raw error
 * body. End users get a stable message per failure kind (publicInvokeMessage): the error chunk, the run's
 * run_failed event, messages.error and message_events carry only that. Operators get the details in logs,
 * with secrets removed (redactSecrets).
 *
 * Every pattern is a single pass without nested quantifiers (linear time on any input).
 */
import type { InvokeErrorKind, InvokeErrorReason } from './errors.js';

const MAX_LOGGED = 2_000;
const REDACTED = '[redacted]';

const RULES: [RegExp, string][] = [
  // scheme://user:password@host → scheme://[redacted]@host
  [/\b([a-z][a-z0-9+.-]{0,20}:\/\/)[^/\s@?#]{1,512}@/gi, `$1${REDACTED}@`],
  // secret-looking query or form parameters
  [
    /([?&;](?:api[_-]?key|key|token|access[_-]?token|refresh[_-]?token|secret|client[_-]?secret|password|passwd|pwd|sig|signature|sign|auth|code)=)[^&\s#"'<>]{1,2048}/gi,
    `$1${REDACTED}`,
  ],
  // Authorization header values
  [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{4,4096}/g, `$1 ${REDACTED}`],
  // "api_key": "…", x-api-key: …, authorization=…
  [/\b((?:x-)?api[_-]?key|authorization|password|secret)(["']?\s{0,3}[:=]\s{0,3}["']?)[^\s"',;}&]{1,2048}/gi, `$1$2${REDACTED}`],
  // provider key formats (OpenAI-style sk-…, and similar prefixed keys)
  [/\b(sk|pk|rk|ak)-[A-Za-z0-9_-]{8,512}/g, `$1-${REDACTED}`],
];

/** The text with credentials in URLs, secret parameters, tokens and keys replaced; capped for logs. */
export function redactSecrets(text: string): string {
  let out = text.length > MAX_LOGGED * 2 ? text.slice(0, MAX_LOGGED * 2) : text;
  for (const [re, to] of RULES) out = out.replace(re, to);
  return out.length > MAX_LOGGED ? `${out.slice(0, MAX_LOGGED)}…` : out;
}

const PUBLIC_MESSAGES: Record<InvokeErrorKind, string> = {
  InvokeBadRequestError: 'The model provider rejected the request.',
  InvokeAuthorizationError: 'The model provider rejected the credentials configured for this model.',
  InvokeRateLimitError: 'The model provider is rate limiting requests; try again later.',
  InvokeError: 'The model call failed.',
  InvokeConnectionError: 'The model provider could not be reached.',
  InvokeServerUnavailableError: 'The model provider is temporarily unavailable; try again later.',
};

const REASON_MESSAGES: Record<InvokeErrorReason, string> = {
  provider_auth_failed:
    'The model provider rejected the credentials configured for this model (provider_auth_failed): check or rotate them.',
  provider_rate_limited: 'The model provider is rate limiting requests (provider_rate_limited); try again later.',
  context_window_exceeded:
    "The conversation is longer than the model's context window (context_window_exceeded): start a new conversation or pick a model with a larger one.",
  content_filtered: "The model provider's content filter blocked this request (content_filtered).",
  provider_timeout:
    'The model provider stopped answering (provider_timeout): nothing arrived within its first-token timeout, or the answer stalled; try again.',
  provider_overloaded: 'The model provider is overloaded (provider_overloaded); try again in a moment.',
  provider_billing_error:
    "The model provider's account has no quota or credit left (provider_billing_error): check the provider account's plan and billing.",
  provider_model_not_found: 'The model provider has no such model for these credentials (provider_model_not_found): check the model name.',
  provider_unreachable: 'The model provider could not be reached (provider_unreachable): check its address and the network.',
  provider_stream_interrupted: "The model provider's answer was cut off before it was complete (provider_stream_interrupted); try again.",
};

/** The stable end-user message of a provider failure kind (no provider URL, body or credential). */
export function publicInvokeMessage(kind: InvokeErrorKind, reason?: InvokeErrorReason): string {
  if (reason && Object.hasOwn(REASON_MESSAGES, reason)) return REASON_MESSAGES[reason];
  return PUBLIC_MESSAGES[kind] ?? PUBLIC_MESSAGES.InvokeError;
}
