/**
 * Error mapping: what an AI SDK provider throws (APICallError with the upstream status, headers and body; an error
 * part of the stream; a fetch failure; a malformed stream) as an InvokeError of the Dify kinds, with the reason a
 * user can act on. Read from each provider's documented error body, not only the HTTP status: OpenAI/Azure
 * `{error: {type, code, message}}`, Anthropic `{type: "error", error: {type, message, details?}}`, Gemini
 * `{error: {code, status, message, details: [{reason}]}}`, Bedrock's `x-amzn-errortype` header, Ollama
 * `{error: "…"}` — the table in docs/models.md "Errors a user can act on", one rule below per row. Messages keep the
 * provider's own error text (operators see it in logs, redacted; the console's credential check shows it) without
 * the credentials.
 */
import { APICallError } from '@ai-sdk/provider';
import { InvokeError, type InvokeErrorKind, type InvokeErrorReason } from '../errors.js';

const CONTEXT_OVERFLOW = [
  /context[_ ]length[_ ]exceeded/i, // OpenAI, Azure, most OpenAI-compatible servers
  /maximum context length/i, // OpenAI, vLLM
  /prompt is too long/i, // Anthropic
  /input (?:is )?too long/i, // Bedrock, Anthropic
  /exceeds the maximum number of tokens/i, // Gemini
  /input token count .* exceeds/i, // Gemini
  /too many (?:input )?tokens/i,
  /context window/i,
  /exceeds the context length/i, // Ollama, llama.cpp
  /model_context_window_exceeded/i,
];
const CONTENT_FILTER = [
  /content[_ ]filter/i,
  /content_policy_violation/i,
  /ResponsibleAIPolicyViolation/i,
  /safety (?:settings|filter)/i,
  /blocked.*(?:safety|policy)/i,
];

/** Retry-After (seconds or an HTTP date) or retry-after-ms, in ms; undefined when absent or unreadable. */
export function retryAfterMs(headers: Record<string, string | undefined> | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined;
  const get = (name: string) => Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  const ms = Number(get('retry-after-ms'));
  if (get('retry-after-ms') !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const v = get('retry-after');
  if (v === undefined) return undefined;
  const s = Number(v);
  if (v.trim() !== '' && Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/** What a provider's error says, read from its documented body (and Bedrock's error-type header). */
export interface ProviderFault {
  status: number | undefined;
  /** The provider's error type/code words: OpenAI `type` and `code`, Anthropic `error.type` and `details.error_code`,
   * Gemini `status` and `details[].reason`, Bedrock's exception name. Lowercased. */
  words: Set<string>;
  message: string;
}

type Json = Record<string, unknown>;
const rec = (v: unknown): Json | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);

/** A body (JSON text or an object) and a Bedrock error type as a ProviderFault. */
export function readFault(status: number | undefined, body: unknown, headers?: Record<string, string | undefined>): ProviderFault {
  const words = new Set<string>();
  const add = (v: unknown) => {
    const s = str(v);
    if (s) words.add(s.toLowerCase());
  };
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
  }
  const top = rec(parsed);
  const err = rec(top?.error) ?? top;
  let message = '';
  if (top) {
    // OpenAI/Azure {error:{type,code}}, Anthropic {type:"error",error:{type,details:{error_code}}}, Gemini
    // {error:{status,details:[{reason}]}}, an OpenAI stream frame {type:"error",code}, Ollama {error:"…"}.
    add(err?.type);
    add(err?.code);
    add(err?.status);
    add(rec(err?.details)?.error_code);
    if (Array.isArray(err?.details)) for (const d of err.details) add(rec(d)?.reason);
    add(rec(err?.innererror)?.code);
    add(rec(rec(top.response)?.error)?.code); // OpenAI response.failed
    message = str(typeof top.error === 'string' ? top.error : undefined) ?? str(err?.message) ?? str(top.message) ?? str(top.Message) ?? '';
  } else if (typeof body === 'string') message = body;
  // Bedrock: `x-amzn-errortype: ThrottlingException:http://internal.amazon.com/…`.
  const amzn = headers && Object.entries(headers).find(([k]) => k.toLowerCase() === 'x-amzn-errortype')?.[1];
  if (amzn) add(amzn.split(':')[0]);
  words.delete('error');
  words.delete('invalid_request_error');
  return { status, words, message: message.slice(0, 500) };
}

interface Rule {
  /** The table row (docs/models.md): provider, what its body says. */
  row: string;
  match: (f: ProviderFault) => boolean;
  kind: InvokeErrorKind;
  reason?: InvokeErrorReason;
}
const has = (f: ProviderFault, ...w: string[]) => w.some((x) => f.words.has(x));
const says = (f: ProviderFault, re: RegExp) => re.test(f.message);

/** In order: the first rule that matches decides (docs/models.md "Errors a user can act on" lists them). */
export const ERROR_RULES: readonly Rule[] = [
  // Credentials: by status, and Gemini's 400 INVALID_ARGUMENT whose reason is API_KEY_INVALID.
  {
    row: 'Gemini 400 `INVALID_ARGUMENT` with reason `API_KEY_INVALID`',
    match: (f) => has(f, 'api_key_invalid', 'api_key_service_blocked'),
    kind: 'InvokeAuthorizationError',
    reason: 'provider_auth_failed',
  },
  {
    row: 'Bedrock `UnrecognizedClientException`, `AccessDeniedException`, `ExpiredTokenException`',
    match: (f) => has(f, 'unrecognizedclientexception', 'accessdeniedexception', 'expiredtokenexception'),
    kind: 'InvokeAuthorizationError',
    reason: 'provider_auth_failed',
  },
  {
    row: 'any 401 / 403 (OpenAI `invalid_api_key`, Anthropic `authentication_error` / `permission_error`, Gemini `PERMISSION_DENIED`)',
    match: (f) => f.status === 401 || f.status === 403,
    kind: 'InvokeAuthorizationError',
    reason: 'provider_auth_failed',
  },
  // The account's money or plan, which waiting does not fix: not retried.
  {
    row: 'OpenAI 429 `insufficient_quota`; Anthropic 402 `billing_error`, 429 `enforced_spend_limit_reached`, 400 "credit balance is too low"',
    match: (f) =>
      has(f, 'insufficient_quota', 'billing_error', 'enforced_spend_limit_reached', 'billing_hard_limit_reached') ||
      f.status === 402 ||
      says(f, /credit balance is too low|reached your specified API usage limits/i),
    kind: 'InvokeBadRequestError',
    reason: 'provider_billing_error',
  },
  {
    row: 'OpenAI/Azure 429 `rate_limit_exceeded`, Anthropic `rate_limit_error`, Gemini `RESOURCE_EXHAUSTED`, Bedrock `ThrottlingException`',
    // Bedrock's ModelNotReadyException is a 429 too, but the model is loading, not the caller too fast: overloaded.
    match: (f) =>
      (f.status === 429 && !has(f, 'modelnotreadyexception')) ||
      has(f, 'throttlingexception', 'rate_limit_error', 'rate_limit_exceeded', 'resource_exhausted'),
    kind: 'InvokeRateLimitError',
    reason: 'provider_rate_limited',
  },
  {
    row: 'Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`, OpenAI 503, Bedrock `ServiceUnavailableException` / `ModelNotReadyException`',
    match: (f) =>
      f.status === 529 ||
      f.status === 503 ||
      has(f, 'overloaded_error', 'unavailable', 'serviceunavailableexception', 'modelnotreadyexception') ||
      says(f, /overloaded/i),
    kind: 'InvokeServerUnavailableError',
    reason: 'provider_overloaded',
  },
  {
    row: 'other 5xx (OpenAI `server_error`, Anthropic `api_error`, Gemini `INTERNAL`, Bedrock `InternalServerException`)',
    match: (f) => (f.status ?? 0) >= 500 || has(f, 'api_error', 'server_error', 'internal', 'internalserverexception'),
    kind: 'InvokeServerUnavailableError',
  },
  {
    row: 'a prompt over the window (OpenAI `context_length_exceeded`, Anthropic "prompt is too long", Gemini "input token count … exceeds", Bedrock "Input is too long")',
    match: (f) => has(f, 'context_length_exceeded') || CONTEXT_OVERFLOW.some((re) => says(f, re)),
    kind: 'InvokeBadRequestError',
    reason: 'context_window_exceeded',
  },
  {
    row: 'a content filter (Azure 400 `content_filter` / `ResponsibleAIPolicyViolation`, OpenAI `content_policy_violation`)',
    match: (f) =>
      has(f, 'content_filter', 'content_policy_violation', 'responsibleaipolicyviolation') || CONTENT_FILTER.some((re) => says(f, re)),
    kind: 'InvokeBadRequestError',
    reason: 'content_filtered',
  },
  {
    row: 'no such model (OpenAI `model_not_found`, Anthropic `not_found_error`, Gemini `NOT_FOUND`, Azure `DeploymentNotFound`, Bedrock `ResourceNotFoundException` / "model identifier is invalid", Ollama 404 "not found, try pulling it first")',
    match: (f) =>
      f.status === 404 ||
      has(f, 'model_not_found', 'not_found_error', 'not_found', 'deploymentnotfound', 'resourcenotfoundexception') ||
      says(f, /model identifier is invalid|try pulling it first|does not exist or you do not have access/i),
    kind: 'InvokeBadRequestError',
    reason: 'provider_model_not_found',
  },
  { row: 'any other 4xx', match: (f) => (f.status ?? 0) >= 400, kind: 'InvokeBadRequestError' },
];

/** The first rule a fault matches, or undefined (none: a 2xx stream's failure, or no status). */
export function ruleFor(f: ProviderFault): Rule | undefined {
  return ERROR_RULES.find((r) => r.match(f));
}

/** Where a failure happened: before the provider answered (`request`), or while its answer streamed (`stream`). */
export type FailurePhase = 'request' | 'stream';

/** The AI SDK's error (or any thrown value) as an InvokeError; `secrets` are cut out of the message. */
export function toProviderInvokeError(err: unknown, secrets: (string | undefined)[] = [], phase: FailurePhase = 'request'): InvokeError {
  if (err instanceof InvokeError) return err;
  const scrub = (text: string) => secrets.reduce<string>((t, s) => (s && s.length >= 4 ? t.split(s).join('[redacted]') : t), text);
  if (APICallError.isInstance(err)) {
    const status = err.statusCode;
    const fault = readFault(status, err.responseBody ?? '', err.responseHeaders);
    const detail = fault.message || (err.responseBody ?? '').slice(0, 500) || err.message.slice(0, 500);
    const rule = status !== undefined && status >= 400 ? ruleFor(fault) : fault.words.size ? ruleFor(fault) : undefined;
    const retry = { retryAfterMs: retryAfterMs(err.responseHeaders) };
    if (rule) {
      return new InvokeError(rule.kind, scrub(`provider answered ${status ?? 'in its stream'}: ${detail}`), {
        reason: rule.reason,
        ...retry,
      });
    }
    if (status === undefined)
      return new InvokeError('InvokeConnectionError', scrub(`cannot reach the provider (${err.message})`), {
        reason: 'provider_unreachable',
      });
    // A 2xx whose stream broke or could not be read ("Failed to process successful response").
    return new InvokeError('InvokeConnectionError', scrub(`the provider's ${status} stream broke (${err.message})`), {
      reason: 'provider_stream_interrupted',
    });
  }
  const e = err as { name?: string; message?: string; cause?: { message?: string; code?: string }; type?: string } | undefined;
  const message = e?.message ?? String(err);
  // The SSRF guard refused a tenant's base_url (core/platform/net/ssrf.ts).
  if (e?.name === 'AddressRefusedError') return new InvokeError('InvokeBadRequestError', scrub(`base_url refused: ${message}`));
  // An error part of the stream: Anthropic's `error` event ({type, message}), OpenAI's error frame once output began.
  if (e && typeof e === 'object' && !(e instanceof Error) && (typeof e.type === 'string' || 'error' in e || 'code' in e)) {
    const fault = readFault(undefined, e);
    const rule = ruleFor(fault);
    if (rule) return new InvokeError(rule.kind, scrub(`the provider's stream failed: ${fault.message}`), { reason: rule.reason });
  }
  if (CONTEXT_OVERFLOW.some((re) => re.test(message)))
    return new InvokeError('InvokeBadRequestError', scrub(message), { reason: 'context_window_exceeded' });
  if (/overloaded|unavailable/i.test(message))
    return new InvokeError('InvokeServerUnavailableError', scrub(message), { reason: 'provider_overloaded' });
  if (/rate.?limit/i.test(message)) return new InvokeError('InvokeRateLimitError', scrub(message), { reason: 'provider_rate_limited' });
  if (
    e?.name === 'TypeError' ||
    /fetch failed|ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|socket|terminated|other side closed/i.test(message)
  ) {
    const cause = e?.cause?.message ? `: ${e.cause.message}` : '';
    // Before the answer began the host could not be reached; after, the answer was cut off.
    return phase === 'stream'
      ? new InvokeError('InvokeConnectionError', scrub(`the provider's answer was cut off: ${message}${cause}`), {
          reason: 'provider_stream_interrupted',
        })
      : new InvokeError('InvokeConnectionError', scrub(`cannot reach the provider: ${message}${cause}`), {
          reason: 'provider_unreachable',
        });
  }
  if (e?.name === 'AI_JSONParseError' || e?.name === 'AI_TypeValidationError')
    return new InvokeError('InvokeConnectionError', scrub(`the provider sent a malformed stream: ${message}`));
  return new InvokeError('InvokeError', scrub(message || 'model invocation failed'));
}
