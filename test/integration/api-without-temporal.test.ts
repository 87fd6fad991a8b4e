/**
 * The api starts while Temporal is unreachable: it serves what needs only PostgreSQL, says which dependency
 * is missing on /readyz, answers a new turn with 503 + Retry-After (nothing left holding the conversation),
 * and works once Temporal is up — without a restart. A worker process started during the outage waits for it.
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort, stablePort } from '../../stack/ports.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTemporalDevServer, type DevServer } from '../../stack/temporal.js';
import { chat, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let temporal: DevServer | null = null;
let worker: ChildProcess | null = null;
let port: number;
let healthPort: number;

beforeAll(async () => {
  port = await stablePort();
  healthPort = await freePort();
  // Nothing listens on `port` yet: this is the Temporal outage the api starts into.
  stack = await startTestStack('no_temporal', {
    env: { TEMPORAL_ADDRESS: `127.0.0.1:${port}`, WORKER_HEALTH_PORT: healthPort },
    worker: 'none',
  });
});
afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((r) => worker!.once('exit', r));
    worker.kill('SIGTERM');
    await exited;
  }
  await stack?.stop();
  await temporal?.stop();
});

const get = (p: string) => fetch(`${stack.apiUrl}${p}`, { headers: { authorization: `Bearer ${stack.demo!.apiKey}` } });

async function readyz() {
  const res = await fetch(`${stack.apiUrl}/readyz`);
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: (await res.json()) as { checks: Record<string, boolean> },
  };
}

describe('the api without Temporal', () => {
  it(
    'starts, serves PostgreSQL-only routes, refuses turns with 503 + Retry-After, and runs turns once Temporal is up',
    { timeout: 120_000 },
    async () => {
      const down = await readyz();
      expect(down.status).toBe(503);
      expect(down.retryAfter).not.toBeNull();
      expect(down.body.checks).toEqual({ database: true, temporal: false, agent_backend: true, credential_watch: true });

      const refused = await postChat(stack.apiUrl, stack.demo!.apiKey, { query: 'Hello?', user: 'ines' });
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ code: 'service_unavailable', status: 503 });
      // Nothing is left holding a conversation: the refused turn is failed and its lock released.
      const convs = await stack.db.conversation.findMany({ where: { app_id: stack.demo!.appId } });
      expect(convs.every((c) => c.active_message_id === null)).toBe(true);
      const msgs = await stack.db.message.findMany({ where: { app_id: stack.demo!.appId } });
      expect(msgs.map((m) => m.status)).toEqual(msgs.map(() => 'failed'));

      // History and conversations need only PostgreSQL.
      const list = await get('/v1/conversations?user=ines');
      expect(list.status).toBe(200);
      const [conv] = ((await list.json()) as { data: { id: string }[] }).data;
      const history = await get(`/v1/messages?conversation_id=${conv!.id}&user=ines`);
      expect(history.status).toBe(200);
      expect(((await history.json()) as { data: { id: string; status: string }[] }).data.map((m) => m.status)).toEqual(['error']);

      // A worker process starts into the outage too and waits; then Temporal comes up, the worker connects,
      // and the same api process starts turns again.
      const workerReady = stack.startWorkerChild();
      const workerHealth = async () => {
        for (let i = 0; i < 120; i++) {
          const r = await fetch(`http://127.0.0.1:${healthPort}/healthz`).catch(() => null);
          if (r) return { status: r.status, body: (await r.json()) as { checks: Record<string, boolean> } };
          await new Promise((x) => setTimeout(x, 250));
        }
        throw new Error('the worker never answered /healthz');
      };
      expect(await workerHealth()).toEqual({ status: 503, body: { status: 'unavailable', checks: { temporal: false, database: true } } });
      temporal = await startTemporalDevServer({
        bin: inject('temporalBin'),
        dataDir: path.join(inject('testDataDir'), 'no-temporal'),
        port,
        uiPort: await stablePort(),
        headless: true,
      });
      worker = await workerReady;
      expect(await workerHealth()).toEqual({ status: 200, body: { status: 'ok', checks: { temporal: true, database: true } } });
      let up = await readyz();
      for (let i = 0; i < 60 && up.status !== 200; i++) {
        await new Promise((r) => setTimeout(r, 500));
        up = await readyz();
      }
      expect(up.body.checks).toEqual({ database: true, temporal: true, agent_backend: true, credential_watch: true });
      expect(up.status).toBe(200);

      const ok = await chat(stack.apiUrl, stack.demo!.apiKey, { query: '/calc 6*7', user: 'ines' });
      expect(ok.status).toBe(200);
      const end = ok.frames.at(-1)!;
      expect(end.event).toBe('message_end');
      const again = await get(`/v1/messages?conversation_id=${end.data.conversation_id as string}&user=ines`);
      expect(again.status).toBe(200);
      expect(((await again.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual([end.data.message_id]);
    },
  );
});
