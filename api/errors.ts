/** One error shape for every client mistake: `{code, message, status}` (Dify's), never a stack trace. */
import { ServiceError } from '@temporalio/client';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import type { Logger } from '../core/logger.js';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export const notFound = (what = 'Resource') => new HttpError(404, 'not_found', `${what} not found.`);

/** Parses with zod; a failure becomes 400 `invalid_param` naming the field. */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.output<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : where;
  throw new HttpError(400, 'invalid_param', `${field}: ${issue.message}`);
}

/** Seconds a client is told to wait (`Retry-After`) when a dependency is down. */
export const RETRY_AFTER_SECONDS = 2;

export const serviceUnavailable = () =>
  new HttpError(503, 'service_unavailable', 'A service this request needs is temporarily unavailable; try again shortly.');

// PostgreSQL: class 08 (connection exception), 57P01-03 (admin/crash shutdown, cannot connect now).
const PG_CONNECTION_CODES = /^(08...|57P0[123])$/;
// Prisma: can't reach, timed out, server closed the connection, pool timeout.
const PRISMA_CONNECTION_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
// @prisma/adapter-pg's DriverAdapterError kinds for a lost or refused connection.
const ADAPTER_CONNECTION_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH']);
// node-postgres' own messages for a dead or unobtainable connection.
const PG_MESSAGES = /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect|Client was closed and is not queryable|Can't reach database server/i;
// gRPC UNAVAILABLE (14) and DEADLINE_EXCEEDED (4): the Temporal frontend is down or unreachable.
const GRPC_UNAVAILABLE = new Set([4, 14]);

/**
 * True when `err` says a dependency (PostgreSQL, Temporal) could not be reached, rather than that the request
 * or the code is wrong: such a request gets 503 + Retry-After (its transaction rolled back, nothing written).
 * Walks `cause` chains and Prisma's `meta.driverAdapterError`, since each layer wraps the one below.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  const stack: unknown[] = [err];
  while (stack.length) {
    const e = stack.pop();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const o = e as { code?: unknown; kind?: unknown; message?: unknown; cause?: unknown; meta?: { driverAdapterError?: unknown } };
    if (typeof o.code === 'string' && (PG_CONNECTION_CODES.test(o.code) || PRISMA_CONNECTION_CODES.has(o.code) || SOCKET_CODES.has(o.code))) return true;
    if (typeof o.kind === 'string' && ADAPTER_CONNECTION_KINDS.has(o.kind)) return true;
    if (o.kind === 'postgres' && typeof o.code === 'string' && PG_CONNECTION_CODES.test(o.code)) return true;
    if (typeof o.message === 'string' && PG_MESSAGES.test(o.message)) return true;
    if (typeof o.code === 'number' && GRPC_UNAVAILABLE.has(o.code) && (e instanceof ServiceError || 'details' in o || 'metadata' in o)) return true;
    stack.push(o.cause, o.meta?.driverAdapterError);
  }
  return false;
}

export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(new HttpError(404, 'not_found', `No route for ${req.method} ${req.path}.`));
};

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let e: HttpError;
    if (err instanceof HttpError) e = err;
    else if (err && typeof err === 'object' && 'type' in err && (err as { type: string }).type === 'entity.too.large') e = new HttpError(413, 'request_entity_too_large', 'The request body is too large.');
    else if (err && typeof err === 'object' && 'type' in err && (err as { type: string }).type === 'entity.parse.failed') e = new HttpError(400, 'invalid_json', 'The request body is not valid JSON.');
    else if (err && typeof err === 'object' && 'status' in err && typeof (err as { status: unknown }).status === 'number' && (err as { status: number }).status < 500) {
      const status = (err as { status: number }).status;
      e = new HttpError(status, 'bad_request', (err as Error).message || 'Bad request.');
    } else if (isDependencyUnavailable(err)) {
      logger.warn({ err: err instanceof Error ? err.message : String(err), path: req.path }, 'dependency unavailable');
      e = serviceUnavailable();
    } else {
      logger.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : err, path: req.path }, 'unhandled error');
      e = new HttpError(500, 'internal_server_error', 'Internal server error.');
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    if (e.status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
    res.status(e.status).json({ code: e.code, message: e.message, status: e.status, ...e.extra });
  };
}
