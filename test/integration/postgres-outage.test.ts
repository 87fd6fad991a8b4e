/**
 * A PostgreSQL outage: a request that needs the database answers 503 + Retry-After (not 500) and writes
 * nothing; once PostgreSQL is back the same api answers normally, its pool having dropped the connections
 * the restart killed, and its LISTEN connection (stream wake-ups) subscribes again. Runs on a private PostgreSQL it can stop, not on the suite's shared one.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig, type Env } from '../../core/platform/config.js';
import { startEmbeddedPg, type EmbeddedPg } from '../../core/platform/embedded-pg.js';
import { EventNotifier } from '../../core/protocol/event-log.js';
import { createLogger } from '../../core/platform/logger.js';
import { stablePort } from '../../stack/ports.js';
import { startStack, type Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat } from '../support/sse.js';

const dataDir = path.join(inject('testDataDir'), 'pg-outage');
let pgPort: number;
let pg: EmbeddedPg | null = null;
let stack: Stack;

/** Progress on stderr, with how long recovery took (a figure for docs/failure-modes.md, not an assertion). */
const note = (what: string) => process.stderr.write(`[pg-outage] ${what}\n`);
const startPg = () => startEmbeddedPg({ dir: path.join(dataDir, 'pg'), port: pgPort, durable: false });

beforeAll(async () => {
  // Not an ephemeral port: PostgreSQL comes back on it.
  pgPort = await stablePort();
  pg = await startPg();
  await pg.ensureDatabase('outage');
  const config = loadConfig(
    {},
    {
      DATA_DIR: dataDir,
      DATABASE_URL: pg.url('outage'),
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `tq-pg-outage-${process.pid}`,
      API_PORT: 0,
      AGENT_BACKEND_PORT: 0,
      DEMO_MODEL_TOKEN_DELAY_MS: 1,
      LOG_LEVEL: (process.env.TEST_LOG_LEVEL as Env['LOG_LEVEL']) ?? 'silent',
    },
  );
  stack = await startStack({ config, logger: createLogger('test-pg-outage', config.LOG_LEVEL), worker: 'in-process' });
});
afterAll(async () => {
  await stack?.stop();
  await pg?.stop();
});

describe('a PostgreSQL outage', () => {
  it('answers 503 + Retry-After while the database is down, and normally as soon as it is back', { timeout: 120_000 }, async () => {
    const key = stack.demo!.apiKey;
    // Warm: the pool holds open connections, which the restart will kill.
    const before = await chat(stack.apiUrl, key, { query: '/calc 1+1', user: 'olga' });
    expect(before.frames.at(-1)!.event).toBe('message_end');
    const conversationId = before.frames.at(-1)!.data.conversation_id as string;

    // A LISTEN connection of the api's kind, to see it come back after the outage.
    const notifier = new EventNotifier(stack.databaseUrl);
    await notifier.start();
    const woken = new Promise<void>((resolve) => notifier.on('outage-probe', resolve));

    await pg!.stop();
    pg = null;
    const down = await postChat(stack.apiUrl, key, { query: 'Are you there?', user: 'olga', conversation_id: conversationId });
    expect(down.status).toBe(503);
    expect(Number(down.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await down.json()).toEqual({ code: 'service_unavailable', message: expect.any(String), status: 503 });
    const ready = await fetch(`${stack.apiUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { checks: Record<string, boolean> }).checks.database).toBe(false);

    // Longer than a reconnect attempt or two: PostgreSQL failovers take 10–60 s.
    await new Promise((r) => setTimeout(r, 3000));
    pg = await startPg();
    const back = Date.now();
    // The first request after the restart succeeds: no dead pooled connection is handed out.
    const after = await chat(stack.apiUrl, key, { query: '/calc 6*7', user: 'olga', conversation_id: conversationId });
    expect(after.status).toBe(200);
    note(`first turn after the restart answered in ${Date.now() - back} ms`);
    // Stream wake-ups work again: the notifier re-subscribed (streams would otherwise fall back to polling).
    try {
      let got = false;
      void woken.then(() => (got = true));
      for (let i = 0; i < 40 && !got; i++) {
        await stack.db.$executeRaw`select pg_notify('message_events', 'outage-probe')`;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(got).toBe(true);
    } finally {
      await notifier.stop();
    }
    expect(after.frames.at(-1)!.event).toBe('message_end');
    // The refused request wrote nothing: the conversation has exactly the two turns that were answered.
    const messages = await stack.db.message.findMany({ where: { conversation_id: conversationId }, orderBy: { created_at: 'asc' } });
    expect(messages.map((m) => [m.query, m.status])).toEqual([
      ['/calc 1+1', 'succeeded'],
      ['/calc 6*7', 'succeeded'],
    ]);
  });
  it("keeps a stream open through the outage: it ends with the turn's terminal event, not cut", { timeout: 150_000 }, async () => {
    const key = stack.demo!.apiKey;
    const res = await postChat(stack.apiUrl, key, { query: '/slow 60 /long 100', user: 'pia' });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    let n = 0;
    const head = await reader.read((f) => f.event === 'agent_message' && ++n === 2);
    const taskId = head[0]!.data.task_id as string;

    await pg!.stop();
    pg = null;
    await new Promise((r) => setTimeout(r, 3000));
    pg = await startPg();

    const rest = await Promise.race([
      reader.read(),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the stream neither ended nor went on within 120 s')), 120_000).unref(),
      ),
    ]);
    const last = [...head, ...rest].at(-1)!;
    expect(['message_end', 'error']).toContain(last.event);
    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
    expect(msg.status).toBe(last.event === 'message_end' ? 'succeeded' : 'failed');
    note(`stream ended with ${last.event} (${msg.error_code ?? 'no error'})`);
  });
});
