/** Real-HTTP fixtures for the inner LLM tests: embedded PostgreSQL, the router on an ephemeral port, SSE reading. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import pino from 'pino';
import { createInnerLlmRouter, type InnerLlmRouterDeps } from '../../api/inner/llm.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { REDACT_PATHS, type Logger } from '../../core/platform/logger.js';
import { freshDatabase } from '../support/db.js';
import type { InvokeRequest } from '../../core/protocol/inner-llm.js';
import { parseSse } from '../../core/platform/sse.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { callerOf, startedTurn } from '../support/exec-context.js';

export const INNER_KEY = 'test-inner-key';
export const ENCRYPTION_KEY = '8f3c2a1b9d7e6f5a4c3b2a19080706050403020100ffeeddccbbaa9988776655';
export const SIGNING_KEY = 'test-execution-context-signing-key';

export interface TestDb {
  db: Db;
  url: string;
  close(): Promise<void>;
}

/** A fresh, migrated database on the run's shared embedded PostgreSQL (test/support/global-setup.ts). */
export async function startTestDb(): Promise<TestDb> {
  const url = await freshDatabase('llm');
  const db = createDb(url);
  return {
    db,
    url,
    close: async () => {
      await db.$disconnect();
    },
  };
}

/** A pino logger writing into memory (level trace), to assert what reaches the logs. */
export function captureLogger(): { logger: Logger; text: () => string } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  // Same redaction as core/platform/logger.ts.
  const logger = pino(
    {
      level: 'trace',
      redact: {
        paths: REDACT_PATHS,
        censor: '[redacted]',
      },
    },
    sink,
  );
  return { logger, text: () => lines.join('') };
}

export interface Served {
  url: string;
  close(): Promise<void>;
}

export async function listen(app: http.RequestListener): Promise<Served> {
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export async function serveRouter(deps: Omit<InnerLlmRouterDeps, 'config'> & { config?: InnerLlmRouterDeps['config'] }): Promise<Served> {
  const app = express();
  app.use(
    '/inner/api/agent/llm',
    createInnerLlmRouter({ config: { INNER_API_KEY: INNER_KEY, ENCRYPTION_KEY, EXECUTION_CONTEXT_SIGNING_KEY: SIGNING_KEY }, ...deps }),
  );
  return listen(app);
}

let counter = 0;

/** The signed context of each tenant's turn in progress (createTenant makes one). */
const contexts = new Map<string, ExecutionContextLayerConfig>();

/**
 * An invoke body with defaults: demo provider, one user message, the caller and execution context of the tenant's
 * turn in progress (createTenant). `invocation_id` and `agent_run_id` stay equal unless both are given.
 */
export function invokeBody(
  tenantId: string,
  target: Partial<InvokeRequest['target']> = {},
  caller: Partial<InvokeRequest['caller']> = {},
): InvokeRequest {
  counter += 1;
  const ctx = contexts.get(tenantId);
  if (!ctx) throw new Error(`invokeBody: tenant ${tenantId} has no turn in progress (create it with createTenant)`);
  const runId = caller.invocation_id ?? caller.agent_run_id ?? `run-${process.pid}-${counter}`;
  return {
    execution_context: ctx,
    caller: {
      invocation_id: runId,
      agent_run_id: runId,
      call_index: 0,
      ...callerOf(ctx),
      ...caller,
    },
    target: {
      provider: 'demo',
      model: 'demo-chat',
      prompt_messages: [{ role: 'user', content: 'hello there' }],
      model_parameters: {},
      stream: true,
      ...target,
    },
  };
}

export function post(base: string, body: unknown, init: { key?: string; signal?: AbortSignal } = {}): Promise<Response> {
  return fetch(`${base}/inner/api/agent/llm/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-inner-api-key': init.key ?? INNER_KEY },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: init.signal,
  });
}

export interface Chunk {
  code: number;
  message: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Read every SSE frame of an invoke response as parsed chunks. */
export async function readChunks(res: Response): Promise<Chunk[]> {
  const out: Chunk[] = [];
  for await (const frame of parseSse(res.body!)) out.push(JSON.parse(frame.data) as Chunk);
  return out;
}

export function answerOf(chunks: Chunk[]): string {
  return chunks
    .filter((c) => c.code === 0)
    .map((c) => c.data.delta.message.content as string)
    .join('');
}

/** A tenant (with a credit pool when `quota` is given) and a turn of it in progress, whose context invokeBody sends. */
export async function createTenant(db: Db, quota?: { limit: bigint; used?: bigint }): Promise<string> {
  const tenant = await db.tenant.create({ data: { name: `tenant-${++counter}` } });
  if (quota) {
    await db.creditPool.create({ data: { tenant_id: tenant.id, quota_limit: quota.limit, quota_used: quota.used ?? 0n } });
  }
  contexts.set(tenant.id, (await startedTurn(db, SIGNING_KEY, { tenantId: tenant.id })).context);
  return tenant.id;
}
