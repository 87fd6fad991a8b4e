/**
 * Which errors mean "a dependency (PostgreSQL, Temporal) could not be reached" rather than "the request or
 * the code is wrong". The api answers those 503 + Retry-After; readers of the event log wait and retry.
 */
import { ServiceError } from '@temporalio/client';

// PostgreSQL: class 08 (connection exception), 57P01-03 (admin/crash shutdown, cannot connect now), 53300
// (too many connections: transient).
const PG_CONNECTION_CODES = /^(08...|57P0[123]|53300)$/;
// Prisma: can't reach, timed out, server closed the connection, pool timeout.
const PRISMA_CONNECTION_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
// @prisma/adapter-pg's DriverAdapterError kinds for a lost or refused connection.
const ADAPTER_CONNECTION_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
// node-postgres' own messages for a dead or unobtainable connection. `timeout expired` (exactly, no code) is what a
// pg.Client's connect rejects with when connectionTimeoutMillis passes: a slow or overloaded server, not a bad request.
const PG_MESSAGES =
  /Connection terminated|connection error and is not queryable|not queryable|timeout exceeded when trying to connect|Client was closed and is not queryable|Can't reach database server|connect ECONNREFUSED|read ECONNRESET|^timeout expired$/i;
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
    if (typeof o.code === 'string' && (PG_CONNECTION_CODES.test(o.code) || PRISMA_CONNECTION_CODES.has(o.code) || SOCKET_CODES.has(o.code)))
      return true;
    if (typeof o.kind === 'string' && ADAPTER_CONNECTION_KINDS.has(o.kind)) return true;
    if (typeof o.message === 'string' && PG_MESSAGES.test(o.message)) return true;
    if (typeof o.code === 'number' && GRPC_UNAVAILABLE.has(o.code) && (e instanceof ServiceError || 'details' in o || 'metadata' in o))
      return true;
    stack.push(o.cause, o.meta?.driverAdapterError);
  }
  return false;
}
