/**
 * Files the user sent with a turn, placed into the agent's workspace by the api side (issue 13, item 4),
 * so the model gets paths it can open with its shell instead of URLs it cannot fetch from the sandbox:
 * uploads are copied from DATA_DIR/uploads; remote_url files are downloaded by our own fetcher, which
 * connects to the very address it checked (no second DNS lookup to rebind), follows redirects only after
 * checking each hop the same way, and stops at a size cap. Files land in `uploads/<message id>/<name>`, written
 * through core/workspace-fs.ts: never through a symlink the agent left at `uploads`, `uploads/<message id>` or
 * the file's name (issue 27 item 5: the write runs as root and would land wherever the link points).
 * Idempotent: a retried prepareTurn writes the same paths again.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import net from 'node:net';
import path from 'node:path';
import dns from 'node:dns';
import { MB, UPLOAD_LIMITS, uploadsDir } from '../../core/uploads.js';
import { isForbiddenAddress } from '../../core/addresses.js';
import { placeWorkspaceFile, WorkspaceRefused } from '../../core/workspace-fs.js';
import type { Config } from '../../core/config.js';
import type { ActivityDeps } from '../deps.js';

/** Where a turn's files go in the workspace: `uploads/<message id>/<name>`. */
export const UPLOADS_DIR = 'uploads';

export interface TurnFile {
  type: string;
  transfer_method: string;
  url: string | null;
  upload_file_id: string | null;
}

export interface PlacedFile {
  /** Relative to the workspace. */
  path: string | null;
  name: string;
  error?: string;
}

export interface FetchOptions {
  maxBytes: number;
  timeoutMs?: number;
  maxRedirects?: number;
  lookup?: (hostname: string) => Promise<string[]>;
  /** Whether an address may be connected to (default: public addresses only, api/ssrf.ts). */
  isAllowed?: (address: string) => boolean;
}

export class RemoteFetchError extends Error {}

const systemLookup = async (hostname: string) => (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** GET with the SSRF guard applied to every hop and the connection pinned to the checked address. */
export async function fetchPinned(raw: string, opts: FetchOptions): Promise<Buffer> {
  const lookup = opts.lookup ?? systemLookup;
  const allowed = opts.isAllowed ?? ((a: string) => !isForbiddenAddress(a));
  let url = new URL(raw);
  // One deadline for all hops and the body (prepareTurn is a local activity with a 30 s attempt timeout).
  const signal = AbortSignal.timeout(opts.timeoutMs ?? 15_000);
  for (let hop = 0; hop <= (opts.maxRedirects ?? 3); hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new RemoteFetchError(`only http and https URLs are fetched (${url.protocol})`);
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const addresses = net.isIP(host) ? [host] : await lookup(host).catch(() => [] as string[]);
    if (addresses.length === 0) throw new RemoteFetchError(`the host "${host}" could not be resolved`);
    if (!addresses.every(allowed))
      throw new RemoteFetchError(`the host "${host}" resolves to a private, loopback or otherwise non-public address`);
    const pinned = addresses[0]!;
    const res = await get(url, pinned, signal);
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location) {
      res.resume();
      url = new URL(res.headers.location, url);
      continue;
    }
    if (status < 200 || status >= 300) {
      res.resume();
      throw new RemoteFetchError(`the server answered ${status}`);
    }
    const declared = Number(res.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > opts.maxBytes) {
      res.destroy();
      throw new RemoteFetchError(`the file is larger than ${opts.maxBytes} bytes`);
    }
    return await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > opts.maxBytes) {
          res.destroy();
          reject(new RemoteFetchError(`the file is larger than ${opts.maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', (err) => reject(new RemoteFetchError(signal.aborted ? 'the download took too long' : err.message)));
    });
  }
  throw new RemoteFetchError('too many redirects');
}

function get(url: URL, address: string, signal: AbortSignal): Promise<http.IncomingMessage> {
  const family = net.isIP(address);
  // The connection goes to the checked address whatever DNS says now; TLS still verifies the host name.
  const pin: LookupFunction = (_hostname, options, callback) => {
    const cb = callback as unknown as (err: Error | null, address: string | { address: string; family: number }[], family?: number) => void;
    if ((options as { all?: boolean }).all) cb(null, [{ address, family }]);
    else cb(null, address, family);
  };
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.get(url, { lookup: pin, signal, headers: { 'user-agent': 'dify-agent-file-fetcher' } }, resolve);
    req.on('error', (err) => reject(new RemoteFetchError(signal.aborted ? 'the download took too long' : err.message)));
  });
}

/** A file name safe inside the workspace: no directories, no leading dots, bounded. */
export function safeName(raw: string, fallback: string): string {
  const base = raw.split(/[\\/]/).pop() ?? '';
  const clean = base
    .replace(/[^\p{L}\p{N}._ -]/gu, '_')
    .replace(/^[.\s]+/, '')
    .slice(0, 120)
    .trim();
  return clean || fallback;
}

export async function placeTurnFiles(
  deps: Pick<ActivityDeps, 'db'> & { config: Pick<Config, 'dataDir'>; fetch?: FetchOptions },
  /** `owner`: the workspace's sandbox uid/gid (core/workspace-uid.ts), so the agent owns what is placed for it. */
  p: { workspaceDir: string; messageId: string; files: TurnFile[]; owner?: { uid: number; gid: number } },
): Promise<PlacedFile[]> {
  const dirs = [UPLOADS_DIR, p.messageId];
  const used = new Set<string>();
  const deadline = Date.now() + 20_000; // all files together, within one prepareTurn attempt
  const out: PlacedFile[] = [];
  for (const [i, f] of p.files.entries()) {
    let name = `file-${i + 1}`;
    try {
      let bytes: Buffer;
      // Remote files were downloaded by the api when the message was sent: they are uploads too (issue 17 M3).
      if (f.upload_file_id) {
        const upload = await deps.db.uploadFile.findUnique({ where: { id: f.upload_file_id } });
        if (!upload) throw new Error('the upload no longer exists');
        name = safeName(upload.name, name);
        bytes = await fs.promises.readFile(path.join(uploadsDir(deps.config as Config), upload.storage_key));
      } else if (f.url) {
        name = safeName(decodeURIComponent(new URL(f.url).pathname), name);
        const left = deadline - Date.now();
        if (left < 500) throw new Error('no time left to download it in this turn');
        bytes = await fetchPinned(f.url, {
          maxBytes: UPLOAD_LIMITS.documentMb * MB,
          ...deps.fetch,
          timeoutMs: Math.min(deps.fetch?.timeoutMs ?? 15_000, left),
        });
      } else {
        throw new Error('the file has neither an upload nor a URL');
      }
      if (used.has(name)) name = `${i + 1}-${name}`;
      used.add(name);
      // Never through a link the agent planted (uploads/ or uploads/<message>/ replaced by a symlink): core/workspace-fs.ts.
      const placed = await placeWorkspaceFile(p.workspaceDir, dirs, name, bytes, { owner: p.owner }).catch((err: unknown) => {
        throw err instanceof WorkspaceRefused ? new WorkspaceRefused(`${err.message}; the file was not placed`) : err;
      });
      out.push({ name, path: placed });
    } catch (err) {
      out.push({ name, path: null, error: (err as Error).message });
    }
  }
  return out;
}
