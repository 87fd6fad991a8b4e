/**
 * The `http_request` builtin (issue 41, docs/tools.md "Built-in tools"): one HTTP request the model asks for, made by
 * the agent backend through the SSRF guard (core/platform/net/ssrf.ts: every address the host resolves to must be
 * public, checked inside the connection's own lookup; HTTP_REQUEST_ALLOW_PRIVATE_NETWORK opens private ranges), with
 * one deadline for lookup, connect, redirects and body (TOOL_TIMEOUT_MS, or less if the model asks) and at most
 * TOOL_MAX_RESPONSE_BYTES of the answer. Redirects of a GET/HEAD are followed (each hop checked again, credentials
 * dropped on a hop to another origin); other methods get the 3xx as it is. Every failure is an observation.
 * No deployment secret is involved: the request carries only what the model wrote.
 */
import { AddressRefusedError, readCapped, type FetchLike } from '../../../core/platform/net/ssrf.js';
import type { HttpRequestArgs } from '../../../core/protocol/builtin-tools.js';
import type { BuiltinOutcome } from './outcome.js';

const MAX_REDIRECTS = 5;
/** Headers a hop to another origin does not carry (they would hand the first host's credentials to the second). */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];
/** Response headers kept out of the observation (a cookie jar is no use to the model and may be a session). */
const DROPPED_RESPONSE_HEADERS = new Set(['set-cookie', 'set-cookie2']);

export interface HttpRequestDeps {
  /** The guarded fetch (createGuardedFetch): refuses non-public addresses, never follows redirects itself. */
  fetch: FetchLike;
  /** TOOL_TIMEOUT_MS: the whole call, redirects and body included. */
  timeoutMs: number;
  /** TOOL_MAX_RESPONSE_BYTES: the body kept, the rest cut with a marker. */
  maxResponseBytes: number;
}

export interface HttpRequestResult {
  status: number;
  status_text: string;
  /** The URL that answered (after redirects). */
  url: string;
  headers: Record<string, string>;
  /** The body as text; null for a binary content type (described in `body_note`). */
  body: string | null;
  body_note?: string;
  truncated?: true;
  redirects?: number;
}

const TEXT_TYPES =
  /^(text\/|application\/([\w.+-]*\+)?(json|xml|javascript|ecmascript|x-www-form-urlencoded|x-ndjson|yaml|x-yaml|csv|graphql)\b)/i;

function isText(contentType: string | null): boolean {
  return contentType === null || contentType === '' || TEXT_TYPES.test(contentType.trim());
}

/** Makes the request and describes the answer; `signal` is the run's (a cancel abandons the call). */
export async function httpRequest(
  deps: HttpRequestDeps,
  args: HttpRequestArgs,
  signal?: AbortSignal,
): Promise<BuiltinOutcome<HttpRequestResult>> {
  const method = args.method ?? 'GET';
  let url: URL;
  try {
    url = new URL(args.url);
  } catch {
    return { isError: true, result: `invalid arguments: url: ${args.url} is not an absolute URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { isError: true, result: 'invalid arguments: url: only http and https URLs' };
  if (url.username !== '' || url.password !== '')
    return {
      isError: true,
      result: 'invalid arguments: url: user:password@ in a URL is refused; send credentials in an Authorization header',
    };

  const limitMs = Math.min(args.timeout_ms ?? deps.timeoutMs, deps.timeoutMs);
  const timeout = AbortSignal.timeout(limitMs);
  const combined = signal ? AbortSignal.any([timeout, signal]) : timeout;
  const headers: Record<string, string> = { 'user-agent': 'dify-agent-http-request', accept: '*/*' };
  for (const [k, v] of Object.entries(args.headers ?? {})) headers[k.toLowerCase()] = v;
  let body: string | undefined = args.body;
  if (args.json !== undefined) {
    body = JSON.stringify(args.json);
    headers['content-type'] ??= 'application/json';
  }

  try {
    let redirects = 0;
    for (;;) {
      const res = await deps.fetch(url, { method, headers, body, signal: combined });
      const location = res.headers.get('location');
      const follow = (method === 'GET' || method === 'HEAD') && res.status >= 300 && res.status < 400 && res.status !== 304 && location;
      if (follow) {
        await res.body?.cancel().catch(() => undefined);
        if (++redirects > MAX_REDIRECTS) return { isError: true, result: `the request was redirected more than ${MAX_REDIRECTS} times` };
        const next = new URL(location, url);
        if (next.protocol !== 'http:' && next.protocol !== 'https:')
          return { isError: true, result: `the server redirected to ${next.protocol} URL, which is not followed` };
        if (next.origin !== url.origin) for (const h of CREDENTIAL_HEADERS) delete headers[h];
        url = next;
        continue;
      }
      return { isError: res.status >= 400, result: await describe(res, url, redirects, deps.maxResponseBytes) };
    }
  } catch (err) {
    if (timeout.aborted) return { isError: true, result: `the request took longer than ${limitMs} ms and was abandoned` };
    if (signal?.aborted) return { isError: true, result: 'the request was cancelled' };
    if (err instanceof AddressRefusedError) return { isError: true, result: `the request was refused: ${err.message}` };
    const e = err as { message?: string; cause?: { message?: string } };
    return { isError: true, result: `the request failed: ${e.cause?.message ?? e.message ?? String(err)}` };
  }
}

async function describe(res: Response, url: URL, redirects: number, maxBytes: number): Promise<HttpRequestResult> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!DROPPED_RESPONSE_HEADERS.has(name)) headers[name] = value;
  });
  const out: HttpRequestResult = { status: res.status, status_text: res.statusText, url: url.href, headers, body: '' };
  if (redirects) out.redirects = redirects;
  const type = res.headers.get('content-type');
  if (!isText(type)) {
    await res.body?.cancel().catch(() => undefined);
    const length = res.headers.get('content-length');
    out.body = null;
    out.body_note = `binary content (${type}${length ? `, ${length} bytes` : ''}) is not shown`;
    return out;
  }
  const { text, truncated } = await readCapped(res, maxBytes);
  out.body = text;
  if (truncated) {
    out.truncated = true;
    out.body_note = `the body was longer than ${maxBytes} bytes; only the first ${maxBytes} are shown`;
  }
  return out;
}
