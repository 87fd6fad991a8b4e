/**
 * The remote_url guard: a URL a client gives us (a chat file) is only accepted when it is http(s) and
 * every address its host resolves to is public. Loopback, private, link-local (cloud metadata),
 * unique-local, multicast, unspecified and reserved ranges are refused for IPv4 and IPv6, including
 * IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4). The downloader must still pin the checked
 * address (or re-check) to be safe against DNS rebinding between this check and its fetch.
 */
import dns from 'node:dns';
import net from 'node:net';
import { isForbiddenAddress } from '../core/addresses.js';
import { HttpError } from './errors.js';

export { isForbiddenAddress };

export type Lookup = (hostname: string) => Promise<string[]>;

const systemLookup: Lookup = async (hostname) => (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

export class RemoteUrlRefused extends HttpError {
  constructor(message: string) {
    super(400, 'invalid_remote_url', message);
  }
}

/**
 * Checks a client-supplied URL; resolves with the parsed URL when it may be fetched, or rejects with
 * 400 `invalid_remote_url` saying why. `field` names the request field in the message.
 */
export async function assertPublicUrl(raw: string, opts: { field?: string; lookup?: Lookup; timeoutMs?: number } = {}): Promise<URL> {
  const field = opts.field ?? 'url';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RemoteUrlRefused(`${field}: is not a valid URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RemoteUrlRefused(`${field}: only http and https URLs are accepted.`);
  // WHATWG URL already normalised numeric hosts (2130706433, 0x7f.1 → 127.0.0.1); IPv6 keeps its brackets.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: string[];
  if (net.isIP(host)) addresses = [host];
  else {
    const lookup = opts.lookup ?? systemLookup;
    const timeoutMs = opts.timeoutMs ?? 3000;
    let timer: NodeJS.Timeout | undefined;
    try {
      addresses = await Promise.race([
        lookup(host),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
        }),
      ]);
    } catch {
      throw new RemoteUrlRefused(`${field}: the host "${host}" could not be resolved.`);
    } finally {
      clearTimeout(timer);
    }
    if (addresses.length === 0) throw new RemoteUrlRefused(`${field}: the host "${host}" could not be resolved.`);
  }
  if (addresses.some(isForbiddenAddress)) {
    throw new RemoteUrlRefused(`${field}: the host "${host}" resolves to a private, loopback or otherwise non-public address.`);
  }
  return url;
}
