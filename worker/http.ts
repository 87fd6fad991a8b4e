/**
 * The worker's own small HTTP server (it has no api): `GET /healthz` (Temporal and PostgreSQL reachable, as
 * before), `GET /readyz` (that, and the worker is polling: state RUNNING) and `GET /metrics` (the worker's
 * registry plus the Temporal SDK's metrics). Port WORKER_HEALTH_PORT (a standalone worker) or the stack's choice.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { METRICS_CONTENT_TYPE, metricsText } from '../core/platform/metrics/http.js';
import { collectProcessMetrics, metricsEnabled } from '../core/platform/metrics/index.js';
import { temporalMetricsText } from '../core/platform/metrics/temporal.js';

/** Resolves true if `p` settles successfully within 2 s. */
function answers(p: () => Promise<unknown>): Promise<boolean> {
  return Promise.race([
    p().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((r) => setTimeout(() => r(false), 2000).unref()),
  ]);
}

export interface WorkerHttpDeps {
  db: Db;
  /** The client of the worker's connection, once connected. */
  temporal: () => Client | null;
  /** The running worker, once created. */
  worker: () => Worker | null;
  logger: Logger;
}

export interface WorkerHttp {
  url: string;
  close: () => Promise<void>;
}

async function dependencyChecks(deps: WorkerHttpDeps): Promise<{ temporal: boolean; database: boolean }> {
  const c = deps.temporal();
  const [database, temporal] = await Promise.all([
    answers(() => deps.db.$queryRaw`select 1`),
    c ? answers(() => c.connection.withDeadline(Date.now() + 2000, () => c.connection.workflowService.getSystemInfo({}))) : false,
  ]);
  return { temporal, database };
}

function json(res: http.ServerResponse, checks: Record<string, boolean>): void {
  const ok = Object.values(checks).every(Boolean);
  res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ status: ok ? 'ok' : 'unavailable', checks }));
}

async function handle(deps: WorkerHttpDeps, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method !== 'GET') return void res.writeHead(405).end();
  if (path === '/healthz') return json(res, await dependencyChecks(deps));
  if (path === '/readyz') {
    // Polling is what makes a worker useful: a worker object that stopped or failed is not ready, whatever else is up.
    const polling = deps.worker()?.getState() === 'RUNNING';
    return json(res, { ...(await dependencyChecks(deps)), polling });
  }
  if (path === '/metrics') {
    const text = await metricsText('worker', temporalMetricsText);
    if (text === null) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","status":404}');
    res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE });
    return void res.end(text);
  }
  res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","status":404}');
}

export async function startWorkerHttp(deps: WorkerHttpDeps, port: number, host = '127.0.0.1'): Promise<WorkerHttp> {
  if (metricsEnabled()) collectProcessMetrics('worker');
  const server = http.createServer((req, res) => {
    handle(deps, req, res).catch((err: unknown) => {
      deps.logger.warn({ err: (err as Error).message }, 'worker http: request failed');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const url = `http://${host}:${(server.address() as AddressInfo).port}`;
  deps.logger.info({ url }, 'worker health and metrics endpoint listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
