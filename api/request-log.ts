/**
 * Structured request logs: every request gets an id (a sane incoming X-Request-Id, else a new uuid),
 * echoed in the X-Request-Id response header, and one log line when it ends with method, path, status,
 * duration and the tenant/app ids once auth knew them. The request context is also kept in
 * AsyncLocalStorage so code below the routes (turn start, file urls) can reach it without threading `req`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import crypto from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Logger } from '../core/platform/logger.js';

export interface RequestContext {
  requestId: string;
  log: Logger;
  /** Base URL of this api replica as reached on this connection's local address (not from Host). */
  selfUrl: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    log?: Logger;
    requestId?: string;
  }
}

const storage = new AsyncLocalStorage<RequestContext>();

export function currentRequest(): RequestContext | undefined {
  return storage.getStore();
}

/** Health probes hit every few seconds; they log at debug so they don't drown the rest. */
const PROBES = new Set(['/healthz', '/readyz']);
const SANE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function selfUrlOf(req: Request): string {
  const addr = req.socket.localAddress ?? '127.0.0.1';
  const host = addr.includes(':') ? (addr.startsWith('::ffff:') ? addr.slice(7) : `[${addr}]`) : addr;
  return `http://${host}:${req.socket.localPort ?? 80}`;
}

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.header('x-request-id');
    const requestId = incoming && SANE_ID.test(incoming) ? incoming : crypto.randomUUID();
    const log = logger.child({ request_id: requestId });
    req.requestId = requestId;
    req.log = log;
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    let logged = false;
    const done = () => {
      if (logged) return;
      logged = true;
      const fields = {
        method: req.method,
        path: req.path,
        status: res.statusCode,
        duration_ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        aborted: !res.writableFinished,
        tenant_id: req.appCtx?.tenantId,
        app_id: req.appCtx?.appId,
      };
      if (res.statusCode >= 500) log.error(fields, 'request failed');
      else if (PROBES.has(req.path)) log.debug(fields, 'request');
      else log.info(fields, 'request');
    };
    res.once('finish', done);
    res.once('close', done);
    storage.run({ requestId, log, selfUrl: selfUrlOf(req) }, next);
  };
}
