/**
 * The SSRF guard, one module for every URL that someone other than the deployment chose: API and MCP tool servers
 * (core/tools, api/console/tool-providers.ts, api/inner/tools.ts), webhooks (activities/webhooks.ts), a
 * tenant's model base_url (core/domain/llm/providers), a chat's remote_url files (api/turns/message-files.ts) and the files a
 * turn places in its workspace (activities/prepare/workspace-files.ts). Its parts:
 * - `checkUrl`: http(s) only, and every address the host resolves to must be allowed (core/platform/net/addresses.ts);
 * - `pinTo`: a DNS lookup that answers with the checked address, so the socket connects to exactly that address
 *   (no second lookup a rebinding DNS server could answer differently; TLS still verifies the host name);
 * - `createGuardedFetch`: a fetch built on node:http with the check inside, redirects not followed (a 3xx is
 *   returned as is) and the body streamed (MCP's streamable HTTP answers with SSE);
 * - `fetchPinned`: a GET that follows redirects only after checking each hop the same way, with a byte cap and
 *   one deadline for all hops, lookups and the body (downloads of files).
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { isForbiddenAddress } from './addresses.js';

export { isForbiddenAddress };

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;
export type Lookup = (hostname: string) => Promise<string[]>;

export interface GuardOptions {
  /** TOOL_/WEBHOOK_/MODEL_ALLOW_PRIVATE_NETWORK: loopback/private addresses are allowed too (tests, trusted networks). */
  allowPrivate?: boolean;
  /** Which addresses may be connected to, instead of `allowPrivate` (tests admit exactly one). */
  isAllowed?: (address: string) => boolean;
  lookup?: Lookup;
}

/** The URL's host may not be connected to (non-public address, or unresolvable). */
export class AddressRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefusedError';
  }
}

/** A download by `fetchPinned` failed after its address was allowed (status, size, deadline, redirects). */
export class RemoteFetchError extends Error {}

const systemLookup: Lookup = async (hostname) => (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** The lookup, given up when `signal` aborts (a DNS server that never answers must not hold a request). */
function resolve(lookup: Lookup, host: string, signal?: AbortSignal): Promise<string[]> {
  if (!signal) return lookup(host);
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise<string[]>((ok, fail) => {
    const onAbort = () => fail(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    lookup(host)
      .then(ok, fail)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Throws AddressRefusedError unless `raw` is http(s) and every address its host has is allowed; resolves with
 * the parsed URL and the address to pin the connection to. `signal` bounds the DNS lookup.
 */
export async function checkUrl(raw: string | URL, opts: GuardOptions, signal?: AbortSignal): Promise<{ url: URL; address: string }> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AddressRefusedError(`${String(raw)} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new AddressRefusedError('only http and https URLs are allowed');
  // WHATWG URL already normalised numeric hosts (2130706433, 0x7f.1 → 127.0.0.1); IPv6 keeps its brackets.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const addresses = net.isIP(host) ? [host] : await resolve(opts.lookup ?? systemLookup, host, signal).catch(() => [] as string[]);
  if (addresses.length === 0) throw new AddressRefusedError(`the host "${host}" could not be resolved`);
  const allowed = opts.isAllowed ?? (opts.allowPrivate ? () => true : (a: string) => !isForbiddenAddress(a));
  if (!addresses.every(allowed)) {
    throw new AddressRefusedError(`the host "${host}" resolves to a private, loopback or otherwise non-public address`);
  }
  return { url, address: addresses[0]! };
}

/** A lookup that answers with the checked address whatever DNS says now; TLS still verifies the host name. */
export function pinTo(address: string): LookupFunction {
  const family = net.isIP(address);
  return (_hostname, options, callback) => {
    const cb = callback as unknown as (err: Error | null, address: string | { address: string; family: number }[], family?: number) => void;
    if ((options as { all?: boolean }).all) cb(null, [{ address, family }]);
    else cb(null, address, family);
  };
}

function bodyOf(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof URLSearchParams) return body.toString();
  throw new TypeError('guarded fetch: only string, bytes or URLSearchParams bodies are supported');
}

/** One request to the checked address; the Response's body streams. Redirects are returned, not followed. */
function requestPinned(url: URL, address: string, init: RequestInit): Promise<Response> {
  const method = (init.method ?? 'GET').toUpperCase();
  const headers = Object.fromEntries(new Headers(init.headers).entries());
  const body = bodyOf(init.body);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise<Response>((resolve, reject) => {
    const req = mod.request(url, { method, headers, lookup: pinTo(address), agent: false, signal: init.signal ?? undefined }, (res) => {
      const status = res.statusCode ?? 502;
      const out = new Headers();
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) out.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
      const empty = method === 'HEAD' || status === 204 || status === 304;
      if (empty) res.resume();
      const stream = empty ? null : (Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>);
      resolve(new Response(stream, { status, statusText: res.statusMessage, headers: out }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A fetch whose every request goes through `checkUrl` and connects to the checked address. */
export function createGuardedFetch(opts: GuardOptions): FetchLike {
  return async (input, init = {}) => {
    const { url, address } = await checkUrl(typeof input === 'string' ? input : input.href, opts, init.signal ?? undefined);
    return requestPinned(url, address, init);
  };
}

/** At most `maxBytes` of the response body; the rest is dropped (the stream cancelled) and reported by `truncated`. */
async function readBytes(res: Response, maxBytes: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  if (!res.body) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.length > maxBytes) {
      chunks.push(value.subarray(0, maxBytes - size));
      truncated = true;
      await reader.cancel().catch(() => undefined);
      break;
    }
    chunks.push(value);
    size += value.length;
  }
  return { bytes: Buffer.concat(chunks), truncated };
}

/** The response body as text, at most `maxBytes` of it; the rest is dropped and reported by `truncated`. */
export async function readCapped(res: Response, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  const { bytes, truncated } = await readBytes(res, maxBytes);
  // A multi-byte character cut at the cap decodes as U+FFFD, which is fine for a marker-terminated text.
  return { text: bytes.toString('utf8'), truncated };
}

export interface PinnedFetchOptions {
  maxBytes: number;
  /** One deadline for every hop's lookup and request and the body (default 15 s). */
  timeoutMs?: number;
  maxRedirects?: number;
  lookup?: Lookup;
  /** Whether an address may be connected to (default: public addresses only). */
  isAllowed?: (address: string) => boolean;
}

/**
 * GET `raw` as bytes: each hop checked by `checkUrl` (public addresses only unless `isAllowed` says otherwise) and
 * connected to the checked address, redirects followed up to `maxRedirects`, at most `maxBytes`, within `timeoutMs`.
 * Refusals throw AddressRefusedError, every other failure RemoteFetchError.
 */
export async function fetchPinned(raw: string, opts: PinnedFetchOptions): Promise<Buffer> {
  const guard: GuardOptions = { lookup: opts.lookup, isAllowed: opts.isAllowed };
  let url = new URL(raw);
  const signal = AbortSignal.timeout(opts.timeoutMs ?? 15_000);
  const failed = (err: unknown) =>
    err instanceof AddressRefusedError || err instanceof RemoteFetchError
      ? err
      : new RemoteFetchError(signal.aborted ? 'the download took too long' : (err as Error).message);
  try {
    for (let hop = 0; hop <= (opts.maxRedirects ?? 3); hop++) {
      const checked = await checkUrl(url, guard, signal);
      const res = await requestPinned(checked.url, checked.address, { signal, headers: { 'user-agent': 'dify-agent-file-fetcher' } });
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        await res.body?.cancel().catch(() => undefined);
        url = new URL(location, url);
        continue;
      }
      if (res.status < 200 || res.status >= 300) {
        await res.body?.cancel().catch(() => undefined);
        throw new RemoteFetchError(`the server answered ${res.status}`);
      }
      const declared = Number(res.headers.get('content-length') ?? NaN);
      const tooLarge = new RemoteFetchError(`the file is larger than ${opts.maxBytes} bytes`);
      if (Number.isFinite(declared) && declared > opts.maxBytes) {
        await res.body?.cancel().catch(() => undefined);
        throw tooLarge;
      }
      const { bytes, truncated } = await readBytes(res, opts.maxBytes);
      if (truncated) throw tooLarge;
      return bytes;
    }
  } catch (err) {
    throw failed(err);
  }
  throw new RemoteFetchError('too many redirects');
}
