/** One error shape for every client mistake: `{code, message, status}` (Dify's), never a stack trace. */
import { CodedError, type ErrorCode } from '../core/protocol/error-codes.js';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import { isDependencyUnavailable } from '../core/platform/dependency-errors.js';
import { JsonGuardError } from '../core/platform/json-guard.js';
import type { Logger } from '../core/platform/logger.js';
import { recordApiError } from '../core/platform/metrics/index.js';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** Parses with zod; a failure becomes 400 `invalid_param` naming the field. */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.output<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.length ? issue.path.join('.') : where;
  // A key can be as long as the body: the answer names at most 200 characters of its path.
  const field = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  throw new HttpError(400, 'invalid_param', `${field}: ${issue.message}`);
}

/** Seconds a client is told to wait (`Retry-After`) when a dependency is down. */
export const RETRY_AFTER_SECONDS = 2;

export const serviceUnavailable = () =>
  new HttpError(503, 'service_unavailable', 'A service this request needs is temporarily unavailable; try again shortly.');

export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(new HttpError(404, 'not_found', `No route for ${req.method} ${req.path}.`));
};

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let e: HttpError;
    if (err instanceof HttpError) e = err;
    // A refusal from below the api (core/domain/): the registry gave its status.
    else if (err instanceof CodedError) e = new HttpError(err.status, err.code, err.message, err.extra);
    // The JSON edge guard (core/platform/json-guard.ts): too deep, NUL, a lone surrogate — the message names the field.
    else if (err instanceof JsonGuardError) e = new HttpError(400, 'invalid_param', err.message);
    else if (err && typeof err === 'object' && 'type' in err && (err as { type: string }).type === 'entity.too.large')
      e = new HttpError(413, 'request_entity_too_large', 'The request body is too large.');
    else if (err && typeof err === 'object' && 'type' in err && (err as { type: string }).type === 'entity.parse.failed')
      e = new HttpError(400, 'invalid_json', 'The request body is not valid JSON.');
    else if (
      err &&
      typeof err === 'object' &&
      'status' in err &&
      typeof (err as { status: unknown }).status === 'number' &&
      (err as { status: number }).status < 500
    ) {
      const status = (err as { status: number }).status;
      e = new HttpError(status, 'bad_request', (err as Error).message || 'Bad request.');
    } else if (isDependencyUnavailable(err)) {
      logger.warn({ err: err instanceof Error ? err.message : String(err), path: req.path }, 'dependency unavailable');
      e = serviceUnavailable();
    } else {
      logger.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : err, path: req.path }, 'unhandled error');
      e = new HttpError(500, 'internal_server_error', 'Internal server error.');
    }
    recordApiError(e.status, e.code);
    if (res.headersSent) {
      res.end();
      return;
    }
    if (e.status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
    res.status(e.status).json({ code: e.code, message: e.message, status: e.status, ...e.extra });
  };
}
