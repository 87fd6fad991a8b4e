/**
 * A fetch for URLs that tenants configure (API tool servers, MCP servers): the SSRF guard of core/addresses.ts
 * runs inside the connection's own DNS lookup, so the socket connects to exactly the address that was checked
 * (no second lookup a rebinding DNS server could answer differently). Redirects are not followed (a 3xx is
 * returned as is): a hop to a private address would need the same check, and tool calls do not need them.
 * Built on node:http so the Response body streams (MCP's streamable HTTP answers with SSE).
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { isForbiddenAddress } from '../addresses.js';

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;
export type Lookup = (hostname: string) => Promise<string[]>;

export interface GuardOptions {
  /** TOOL_ALLOW_PRIVATE_NETWORK: loopback/private addresses are allowed too (tests, trusted networks). */
  allowPrivate: boolean;
  lookup?: Lookup;
}

/** The URL's host may not be connected to (non-public address, or unresolvable). */
export class AddressRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefusedError';
  }
}

const systemLookup: Lookup = async (hostname) => (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** Throws AddressRefusedError unless `raw` is http(s) and every address its host has is allowed. */
export async function checkUrl(raw: string, opts: GuardOptions): Promise<{ url: URL; address: string }> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AddressRefusedError(`${raw} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new AddressRefusedError('only http and https URLs are allowed');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const addresses = net.isIP(host) ? [host] : await (opts.lookup ?? systemLookup)(host).catch(() => [] as string[]);
  if (addresses.length === 0) throw new AddressRefusedError(`the host "${host}" could not be resolved`);
  if (!opts.allowPrivate && addresses.some(isForbiddenAddress)) {
    throw new AddressRefusedError(`the host "${host}" resolves to a private, loopback or otherwise non-public address`);
  }
  return { url, address: addresses[0]! };
}

/** A lookup that answers with the checked address whatever DNS says now; TLS still verifies the host name. */
function pinTo(address: string): LookupFunction {
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

export function createGuardedFetch(opts: GuardOptions): FetchLike {
  return async (input, init = {}) => {
    const { url, address } = await checkUrl(typeof input === 'string' ? input : input.href, opts);
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
  };
}

/** The response body as text, at most `maxBytes` of it; the rest is dropped and reported by `truncated`. */
export async function readCapped(res: Response, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  if (!res.body) return { text: '', truncated: false };
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
  // A multi-byte character cut at the cap decodes as U+FFFD, which is fine for a marker-terminated text.
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}
