/**
 * The agent stub's own listener (issue 27, docs/PROTOCOL.md §4): an HTTP server on a unix socket that serves the
 * stub routes and nothing else — no run protocol, no /healthz — so the one thing a sandboxed command can reach
 * (the socket is bind-mounted into its sandbox) cannot start, read or cancel runs. The socket is 0666 (any sandbox
 * uid may connect; the stub token is the credential) inside a 0700 directory (no other user of the host reaches it).
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from '../core/platform/logger.js';
import { HttpError } from './errors.js';

/** sun_path holds 108 bytes with its NUL. */
const MAX_SOCKET_PATH = 107;

/**
 * The socket path: AGENT_STUB_SOCKET, else `<dataDir>/sandbox/stub-<port>.sock` (one per backend listener, so
 * replicas sharing a data dir do not collide). A default that would not fit sun_path moves under the system tmp dir.
 */
export function stubSocketPath(opts: { explicit?: string; dataDir: string; port: number }): string {
  if (opts.explicit) return path.resolve(opts.explicit);
  const p = path.join(opts.dataDir, 'sandbox', `stub-${opts.port}.sock`);
  if (Buffer.byteLength(p) <= MAX_SOCKET_PATH) return p;
  const tag = crypto.createHash('sha256').update(opts.dataDir).digest('hex').slice(0, 12);
  return path.join(os.tmpdir(), `dify-agent-stub-${tag}`, `stub-${opts.port}.sock`);
}

/** A socket file nobody listens on any more (a crashed backend's) is removed; a live one is an error. */
async function removeStale(socketPath: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket()) throw new Error(`agent stub: ${socketPath} exists and is not a socket`);
  const live = await new Promise<boolean>((resolve) => {
    const c = net.connect(socketPath);
    c.once('connect', () => (c.destroy(), resolve(true)));
    c.once('error', () => resolve(false));
  });
  if (live) throw new Error(`agent stub: another process listens on ${socketPath} (set AGENT_STUB_SOCKET)`);
  fs.unlinkSync(socketPath);
}

/**
 * The body parser's and the JSON guard's other refusals (NUL, depth, a lone surrogate, an unsupported charset or
 * Content-Encoding) are the client's: their 4xx, not a 500 (issue 28 fuzzer).
 */
function clientError(err: unknown): HttpError | null {
  const e = err as { status?: unknown; message?: unknown } | null;
  if (typeof e?.status !== 'number' || e.status < 400 || e.status >= 500) return null;
  return new HttpError(e.status, 'invalid_request', typeof e.message === 'string' ? e.message : 'bad request');
}

export interface StubServer {
  socketPath: string;
  close(): Promise<void>;
}

/**
 * `privateDir`: the socket's directory is this backend's own (the default path): it is made 0700. An explicit
 * AGENT_STUB_SOCKET's directory is left as the operator made it (it may be shared, e.g. /tmp).
 */
export async function startStubServer(opts: {
  router: Router;
  socketPath: string;
  logger: Logger;
  privateDir: boolean;
}): Promise<StubServer> {
  const app = express();
  app.disable('x-powered-by');
  app.use(opts.router);
  app.use((_req: Request, _res: Response, next: NextFunction) =>
    next(new HttpError(404, 'not_found', 'the agent stub serves /agent-stub/config/prompt only')),
  );
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const x = err as { type?: string } | null;
    const e =
      err instanceof HttpError
        ? err
        : x?.type === 'entity.parse.failed'
          ? new HttpError(400, 'invalid_request', 'the request body is not valid JSON')
          : x?.type === 'entity.too.large'
            ? new HttpError(413, 'payload_too_large', 'the request body is too large')
            : (clientError(err) ?? new HttpError(500, 'internal_error', 'internal error'));
    if (e.status >= 500) opts.logger.error({ err }, 'agent stub: request failed');
    if (res.headersSent) return void res.end();
    res.status(e.status).json({ code: e.code, message: e.message, status: e.status });
  });

  const dir = path.dirname(opts.socketPath);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (opts.privateDir) fs.chmodSync(dir, 0o700);
  await removeStale(opts.socketPath);
  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  fs.chmodSync(opts.socketPath, 0o666);
  return {
    socketPath: opts.socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          fs.rmSync(opts.socketPath, { force: true });
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
