/**
 * A request that fails because PostgreSQL or Temporal cannot be reached answers 503 `service_unavailable`
 * with Retry-After, never 500; every other failure keeps its answer. The errors are the shapes the layers
 * really throw (recorded against a stopped embedded PostgreSQL and a closed Temporal port).
 */
import type { AddressInfo } from 'node:net';
import { ServiceError } from '@temporalio/client';
import express from 'express';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorHandler, HttpError } from '../../api/errors.js';
import { Prisma } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';

const known = (code: string, message: string, meta: Record<string, unknown> = {}) =>
  new Prisma.PrismaClientKnownRequestError(message, { code, clientVersion: 'test', meta });
const adapterError = (cause: Record<string, unknown>) =>
  Object.assign(new Error(String(cause.kind)), { name: 'DriverAdapterError', cause });
const grpc = (code: number, details: string) => Object.assign(new Error(`${code} ${details}`), { code, details, metadata: {} });
const pgError = (code: string, message: string) => Object.assign(new pg.DatabaseError(message, 0, 'error'), { code });

const unavailable: [string, unknown][] = [
  [
    'Prisma: database not reachable (raw query)',
    known('P2010', "Raw query failed. Code: `N/A`. Message: `Can't reach database server at 127.0.0.1:5432`", {
      driverAdapterError: adapterError({ kind: 'DatabaseNotReachable', host: '127.0.0.1', port: 5432 }),
    }),
  ],
  ['Prisma: database not reachable (model query, transaction)', known('P1001', "Can't reach database server at 127.0.0.1:5432")],
  ['Prisma: server closed the connection', known('P1017', 'Server has closed the connection.')],
  ['adapter: connection closed', known('P2010', 'Raw query failed.', { driverAdapterError: adapterError({ kind: 'ConnectionClosed' }) })],
  [
    'adapter: PostgreSQL shutting down (57P01)',
    known('P2010', 'Raw query failed.', {
      driverAdapterError: adapterError({ kind: 'postgres', code: '57P01', message: 'terminating connection due to administrator command' }),
    }),
  ],
  ['node-postgres: transaction connection lost', new Error('Client has encountered a connection error and is not queryable')],
  ['node-postgres: connection terminated', new Error('Connection terminated unexpectedly')],
  ['node-postgres: admin shutdown', pgError('57P01', 'terminating connection due to administrator command')],
  ['node-postgres: pool timeout', new Error('timeout exceeded when trying to connect')],
  [
    'socket: connection refused',
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect', errno: -111 }),
  ],
  ['Temporal: UNAVAILABLE', new ServiceError('Failed to signal Workflow', { cause: grpc(14, 'No connection established') })],
  ['Temporal: DEADLINE_EXCEEDED', new ServiceError('Failed to start Workflow', { cause: grpc(4, 'Deadline exceeded') })],
];
const other: [string, unknown, number, string][] = [
  ['a unique violation', known('P2002', 'Unique constraint failed'), 500, 'internal_server_error'],
  [
    'a query error from PostgreSQL',
    known('P2010', 'Raw query failed.', { driverAdapterError: adapterError({ kind: 'postgres', code: '42601', message: 'syntax error' }) }),
    500,
    'internal_server_error',
  ],
  ['Temporal: NOT_FOUND', new ServiceError('Failed to query Workflow', { cause: grpc(5, 'not found') }), 500, 'internal_server_error'],
  ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')"), 500, 'internal_server_error'],
  ['a client mistake', new HttpError(409, 'conversation_busy', 'busy'), 409, 'conversation_busy'],
];

let url: string;
let server: ReturnType<express.Express['listen']>;
let next: unknown;

beforeAll(async () => {
  const app = express();
  app.get('/fail', () => {
    throw next;
  });
  app.use(errorHandler(createLogger('test-dependency-errors', 'silent')));
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/fail`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('errors of an unreachable dependency', () => {
  it.each(unavailable)('%s → 503 service_unavailable + Retry-After', async (_what, err) => {
    next = err;
    const res = await fetch(url);
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await res.json()).toEqual({ code: 'service_unavailable', message: expect.any(String), status: 503 });
  });

  it.each(other)('%s keeps its answer (%i %s)', async (_what, err, status, code) => {
    next = err;
    const res = await fetch(url);
    expect(res.status).toBe(status);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(((await res.json()) as { code: string }).code).toBe(code);
  });
});
