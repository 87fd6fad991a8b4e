/**
 * Error mapping: what an AI SDK provider throws (APICallError with the upstream status, headers and body;
 * a fetch failure; a malformed stream) as an InvokeError of the Dify kinds, with the reason a user can act on:
 * 401/403 → provider_auth_failed, 429 → provider_rate_limited (with the provider's Retry-After), a prompt
 * longer than the context window → context_window_exceeded, a content filter → content_filtered. Messages
 * keep the provider's own error text (operators see it in logs, redacted; the console's credential check
 * shows it) without the credentials.
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

/** The provider's error text: its JSON `error.message` / `message`, else the body, else the SDK's message. */
function providerMessage(err: APICallError): string {
  const body = err.responseBody ?? '';
  try {
    const j = JSON.parse(body) as { error?: { message?: string } | string; message?: string; Message?: string };
    const m = typeof j.error === 'string' ? j.error : (j.error?.message ?? j.message ?? j.Message);
    if (m) return m.slice(0, 500);
  } catch {
    /* not JSON */
  }
  return (body || err.message).slice(0, 500);
}

function kindOfStatus(status: number | undefined): InvokeErrorKind {
  if (status === undefined) return 'InvokeConnectionError';
  if (status === 429) return 'InvokeRateLimitError';
  if (status === 401 || status === 403) return 'InvokeAuthorizationError';
  if (status === 529 || status >= 500) return 'InvokeServerUnavailableError';
  if (status >= 400) return 'InvokeBadRequestError';
  // A 2xx whose stream broke or could not be read ("Failed to process successful response").
  return 'InvokeConnectionError';
}

/** The AI SDK's error (or any thrown value) as an InvokeError; `secrets` are cut out of the message. */
export function toProviderInvokeError(err: unknown, secrets: (string | undefined)[] = []): InvokeError {
  if (err instanceof InvokeError) return err;
  const scrub = (text: string) => secrets.reduce<string>((t, s) => (s && s.length >= 4 ? t.split(s).join('[redacted]') : t), text);
  if (APICallError.isInstance(err)) {
    const status = err.statusCode;
    const detail = providerMessage(err);
    const text = `${detail} ${err.responseBody ?? ''}`;
    let kind = kindOfStatus(status);
    let reason: InvokeErrorReason | undefined;
    if (kind === 'InvokeAuthorizationError') reason = 'provider_auth_failed';
    else if (kind === 'InvokeRateLimitError') reason = 'provider_rate_limited';
    else if (CONTEXT_OVERFLOW.some((re) => re.test(text))) {
      kind = 'InvokeBadRequestError';
      reason = 'context_window_exceeded';
    } else if (CONTENT_FILTER.some((re) => re.test(text))) {
      kind = 'InvokeBadRequestError';
      reason = 'content_filtered';
    }
    const where =
      status === undefined
        ? `cannot reach the provider (${err.message})`
        : status < 400
          ? `the provider's ${status} stream broke (${err.message})`
          : `provider answered ${status}`;
    return new InvokeError(kind, scrub(`${where}: ${detail}`), { reason, retryAfterMs: retryAfterMs(err.responseHeaders) });
  }
  const e = err as { name?: string; message?: string; cause?: { message?: string } } | undefined;
  const message = e?.message ?? String(err);
  // The SSRF guard refused a tenant's base_url (core/platform/net/ssrf.ts).
  if (e?.name === 'AddressRefusedError') return new InvokeError('InvokeBadRequestError', scrub(`base_url refused: ${message}`));
  // A thrown stream error from providers that report failures in-stream (OpenAI `error` event, Anthropic `error`).
  if (CONTEXT_OVERFLOW.some((re) => re.test(message)))
    return new InvokeError('InvokeBadRequestError', scrub(message), { reason: 'context_window_exceeded' });
  if (/overloaded|unavailable/i.test(message)) return new InvokeError('InvokeServerUnavailableError', scrub(message));
  if (/rate.?limit/i.test(message)) return new InvokeError('InvokeRateLimitError', scrub(message), { reason: 'provider_rate_limited' });
  if (e?.name === 'TypeError' || /fetch failed|ECONNREFUSED|ECONNRESET|socket|terminated/i.test(message)) {
    const cause = e?.cause?.message ? `: ${e.cause.message}` : '';
    return new InvokeError('InvokeConnectionError', scrub(`the provider connection failed: ${message}${cause}`));
  }
  if (e?.name === 'AI_JSONParseError' || e?.name === 'AI_TypeValidationError')
    return new InvokeError('InvokeConnectionError', scrub(`the provider sent a malformed stream: ${message}`));
  return new InvokeError('InvokeError', scrub(message || 'model invocation failed'));
}
