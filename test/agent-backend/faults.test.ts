/**
 * The agent backend under faults (issue 22, items 2, 3, 6): PostgreSQL stopped and restarted in the
 * middle of a streaming run, and the inner LLM endpoint killed mid-stream and brought back. A private
 * embedded PostgreSQL (the suite's shared cluster must stay up) on a port outside the ephemeral range,
 * so it comes back on the same port; the real gateway (api/inner/llm.ts) with the demo model and the
 * real credit ledger for the model-call replay.
 */
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import pgClient from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createInnerLlmRouter } from '../../api/inner/llm.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { startEmbeddedPg, type EmbeddedPg } from '../../core/platform/embedded-pg.js';
import { createLogger } from '../../core/platform/logger.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { isTerminal, type RunEvent } from '../../core/protocol/run.js';
import { PgRunStore } from '../../agent-backend/store.js';
import { stablePort } from '../../stack/ports.js';
import { createTenant, ENCRYPTION_KEY, SIGNING_KEY } from '../llm/helpers.js';
import { startedTurn } from '../support/exec-context.js';
import { sleep, type FakeInnerLlm } from './fake-inner-llm.js';
import { INNER_KEY, runRequest, startBackend, startFake, startPg, textOf, type TestBackend } from './harness.js';

/** A PostgreSQL of this file only, which the tests stop and start again on the same port and data dir. */
class PrivatePg {
  private pg: EmbeddedPg | null = null;
  constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}
  url = (db: string) => `postgresql://postgres:postgres@127.0.0.1:${this.port}/${db}`;
  async start(): Promise<void> {
    this.pg = await startEmbeddedPg({ dir: this.dir, port: this.port, durable: false });
  }
  async stop(): Promise<void> {
    await this.pg?.stop();
    this.pg = null;
  }
  async database(name: string): Promise<string> {
    await this.pg!.ensureDatabase(name);
    return this.url(name);
  }
}

let pg: PrivatePg;
let fake: FakeInnerLlm;

beforeAll(async () => {
  pg = new PrivatePg(path.join(inject('testDataDir'), `h2-faults-pg-${process.pid}`), await stablePort());
  await pg.start();
  fake = await startFake();
}, 120_000);

afterAll(async () => {
  await fake?.stop();
  await pg?.stop();
});

const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i} `);

/** Dense ids 1..n, one terminal and it is last. */
function expectWellFormed(events: RunEvent[]) {
  expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
  expect(events.filter(isTerminal)).toHaveLength(1);
  expect(isTerminal(events.at(-1)!)).toBe(true);
}

async function allEvents(b: TestBackend, runId: string): Promise<RunEvent[]> {
  return (await b.client.page(runId, '?limit=500')).events;
}

/** Follows a run over SSE from the start; resolves with every event once the terminal arrived. */
function follow(b: TestBackend, runId: string, onEvent?: (e: RunEvent) => void): Promise<RunEvent[]> {
  return b.client.sse(runId, { onEvent }).then((r) => r.events);
}

describe('PostgreSQL outage in the middle of a streaming run', () => {
  it('stores every event once the database is back: no gap, the run succeeds, no backend_restarted', async () => {
    const db = await pg.database('outage_short');
    const b = await startBackend({ databaseUrl: db, apiUrl: fake.url, options: { heartbeatMs: 200, pollMs: 250 } });
    try {
      const text = words(120, 'w');
      fake.script({ text, delayMs: 100 }); // ~12 s of streaming
      const { run_id } = await b.client.createRun(runRequest());
      let firstDelta!: () => void;
      const started = new Promise<void>((r) => (firstDelta = r));
      const followed = follow(b, run_id, (e) => e.type === 'agent_message_delta' && firstDelta());
      await started;
      await pg.stop(); // ~10 s down while the model keeps streaming
      await sleep(10_000);
      await pg.start();

      const live = await followed;
      const events = await allEvents(b, run_id);
      expectWellFormed(events);
      expect(live.map((e) => e.id)).toEqual(events.map((e) => e.id)); // the SSE follower rode through it
      const t = events.at(-1)!;
      expect(t.type).toBe('run_succeeded');
      if (t.type === 'run_succeeded') expect(t.data.output).toBe(text.join(''));
      expect(textOf(events)).toBe(text.join(''));
      expect(events.some((e) => e.type === 'run_failed')).toBe(false);
    } finally {
      await b.stop();
    }
  }, 120_000);

  it('does not reap a live owner when the outage outlasts the owner grace, and stores its terminal afterwards', async () => {
    const db = await pg.database('outage_long');
    const opts = { heartbeatMs: 200, staleAfterMs: 2_000, reapIntervalMs: 200, pollMs: 250 };
    const owner = await startBackend({ databaseUrl: db, apiUrl: fake.url, options: opts });
    // The peer's follower hears of new events only through NOTIFY and the catch-up after LISTEN is
    // re-subscribed: its poll fallback is out of reach of this test.
    const peer = await startBackend({ databaseUrl: db, apiUrl: fake.url, options: { ...opts, pollMs: 600_000 } });
    try {
      const text = words(30, 'v');
      fake.script({ text, delayMs: 100 }); // finishes (terminal append) while the database is down
      const { run_id } = await owner.client.createRun(runRequest());
      let firstDelta!: () => void;
      const started = new Promise<void>((r) => (firstDelta = r));
      const followed = follow(peer, run_id, (e) => e.type === 'agent_message_delta' && firstDelta());
      await started;
      await pg.stop();
      await sleep(8_000); // 4× the grace; the model finished meanwhile
      await pg.start();

      const live = await Promise.race([
        followed,
        sleep(30_000).then(() => Promise.reject(new Error('the follower missed events after the outage'))),
      ]);
      const events = await allEvents(owner, run_id);
      expect(live.map((e) => e.id)).toEqual(events.map((e) => e.id));
      expectWellFormed(events);
      const t = events.at(-1)!;
      expect(t.type, JSON.stringify(t.data)).toBe('run_succeeded');
      expect(textOf(events)).toBe(text.join(''));
      // Neither replica judged the owner dead once the database was back.
      await sleep(3_000);
      expect((await owner.client.status(run_id)).status).toBe('succeeded');
      expect((await allEvents(peer, run_id)).filter(isTerminal)).toHaveLength(1);
    } finally {
      await peer.stop();
      await owner.stop();
    }
  }, 120_000);

  it('fails the run loudly (event_store_unavailable) when the database stays away past its wall-clock budget, still without a gap', async () => {
    const db = await pg.database('outage_past_budget');
    const b = await startBackend({ databaseUrl: db, apiUrl: fake.url, options: { heartbeatMs: 200, pollMs: 250 } });
    try {
      fake.script({ text: words(40, 'x'), delayMs: 100 });
      const { run_id } = await b.client.createRun(runRequest({ metadata: { limits: { max_wall_clock_ms: 3_000 } } }));
      let firstDelta!: () => void;
      const started = new Promise<void>((r) => (firstDelta = r));
      const followed = follow(b, run_id, (e) => e.type === 'agent_message_delta' && firstDelta());
      await started;
      await pg.stop();
      await sleep(5_000); // the run's whole budget is spent while events wait to be stored
      await pg.start();

      await followed;
      const events = await allEvents(b, run_id);
      expectWellFormed(events);
      const t = events.at(-1)!;
      expect(t.type).toBe('run_failed');
      if (t.type === 'run_failed') expect(t.data.reason).toBe('event_store_unavailable');
      // What was stored is a prefix of the answer: nothing missing in the middle.
      expect(words(40, 'x').join('').startsWith(textOf(events))).toBe(true);
    } finally {
      await b.stop();
    }
  }, 120_000);

  it('answers 503 service_unavailable with Retry-After while the database is down, and recovers by itself', async () => {
    const db = await pg.database('outage_routes');
    const b = await startBackend({ databaseUrl: db, apiUrl: fake.url });
    try {
      const { run_id } = await b.client.createRun(runRequest());
      await b.client.untilTerminal(run_id);
      await pg.stop();
      try {
        for (const res of [await b.client.request('GET', `/runs/${run_id}`), await b.client.request('POST', '/runs', runRequest())]) {
          expect(res.status).toBe(503);
          expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
          expect(await res.json()).toMatchObject({ code: 'service_unavailable', status: 503 });
        }
      } finally {
        await pg.start();
      }
      const res = await b.client.request('GET', `/runs/${run_id}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ run_id, status: 'succeeded' });
    } finally {
      await b.stop();
    }
  }, 120_000);
});

describe('a lost LISTEN connection', () => {
  it('is re-subscribed with a catch-up read: a follower gets the events whose NOTIFY was lost', async () => {
    const db = await pg.database('listen_lost');
    const owner = await startBackend({ databaseUrl: db, apiUrl: fake.url });
    // The peer's follower can only learn of new events through NOTIFY or the catch-up (no poll).
    const peer = await startBackend({ databaseUrl: db, apiUrl: fake.url, options: { pollMs: 600_000 } });
    const admin = new pgClient.Client({ connectionString: db });
    await admin.connect();
    try {
      fake.script({ text: ['thinking '], hang: true });
      const { run_id } = await owner.client.createRun(runRequest());
      let firstDelta!: () => void;
      const started = new Promise<void>((r) => (firstDelta = r));
      const followed = follow(peer, run_id, (e) => e.type === 'agent_message_delta' && firstDelta());
      await started;
      // Every LISTEN connection dies; the run ends before they are back (they reconnect after ~1 s).
      const killed = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'listen %'`,
      );
      expect(killed.rowCount).toBe(2);
      expect((await owner.client.cancel(run_id, { reason: 'user_stop' })).status).toBe(202);
      const live = await Promise.race([followed, sleep(30_000).then(() => Promise.reject(new Error('the follower never caught up')))]);
      expect(live.at(-1)?.type).toBe('run_cancelled');
      expect(live.map((e) => e.id)).toEqual((await allEvents(owner, run_id)).map((e) => e.id));
    } finally {
      await admin.end();
      await peer.stop();
      await owner.stop();
    }
  }, 60_000);
});

describe('a retried append', () => {
  it('whose first attempt committed (answer lost) is not stored twice', async () => {
    const store = new PgRunStore(await pg.database('append_retry'), createLogger('store-test', 'silent'));
    await store.init();
    try {
      const { run } = await store.createRun({ runId: 'r-append', idempotencyKey: null, purpose: 'agent_app', request: {}, ownerId: 'me' });
      const first = await store.appendEvent(run.run_id, 'agent_message_delta', { delta: 'Hello' }, undefined, { expectedSeq: 1 });
      // The same append again (its answer was lost): the store finds it in place instead of adding a second one.
      const again = await store.appendEvent(run.run_id, 'agent_message_delta', { delta: 'Hello' }, undefined, { expectedSeq: 1 });
      expect(again?.id).toBe(first?.id);
      expect((await store.listEvents(run.run_id, 0, 10)).map((e) => e.data)).toEqual([{ delta: 'Hello' }]);
      // A different event at a taken position is refused, not appended after it.
      expect(await store.appendEvent(run.run_id, 'agent_message_delta', { delta: 'Bye' }, undefined, { expectedSeq: 1 })).toBeNull();
      expect(await store.listEvents(run.run_id, 0, 10)).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});

describe('the api (inner LLM gateway) dies in the middle of a model call', () => {
  let db: Db;
  let dbUrl: string;
  beforeAll(async () => {
    dbUrl = (await startPg('faults_gateway')).url;
    db = createDb(dbUrl);
  });
  afterAll(async () => {
    await db?.$disconnect();
  });

  /** The real gateway on a fixed port; records the billing request id of every invoke it receives. */
  async function startGateway(port: number, seen: string[]): Promise<http.Server> {
    const app = express();
    app.use(express.json({ limit: '20mb' }));
    app.use((req, _res, next) => {
      const c = (req.body as { caller?: { invocation_id?: string; call_index?: number } } | undefined)?.caller;
      if (c) seen.push(`${c.invocation_id}:${c.call_index}`);
      next();
    });
    const providers = createDefaultProviders({
      DEMO_MODEL_TOKEN_DELAY_MS: 60,
      OPENAI_COMPATIBLE_BASE_URL: undefined,
      OPENAI_COMPATIBLE_API_KEY: undefined,
      OPENAI_COMPATIBLE_MODEL: undefined,
    } as never);
    const logger = createLogger('gateway-test', 'silent');
    app.use(
      '/inner/api/agent/llm',
      createInnerLlmRouter({
        db,
        config: { INNER_API_KEY: INNER_KEY, ENCRYPTION_KEY, EXECUTION_CONTEXT_SIGNING_KEY: SIGNING_KEY },
        logger,
        providers,
      }),
    );
    const server = http.createServer(app);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    return server;
  }

  it('sends the same call again to the replacement, shows one continuous answer and is charged once', async () => {
    const port = await stablePort();
    const seen: string[] = [];
    let gateway = await startGateway(port, seen);
    const tenant = await createTenant(db, { limit: 1_000_000n });
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: `http://127.0.0.1:${port}` });
    try {
      const request = runRequest({ query: '/long 60', history: false });
      const llm = request.composition.layers.find((l) => l.type === 'llm')!;
      llm.config = { provider: 'demo', model: 'demo-chat', model_settings: {} };
      const ec = request.composition.layers.find((l) => l.type === 'execution_context')!;
      // The gateway honours the call only with the signed context of a turn in progress.
      ec.config = (await startedTurn(db, SIGNING_KEY, { tenantId: tenant })).context;
      const { run_id } = await b.client.createRun(request);

      let deltas = 0;
      let cut!: () => void;
      const midStream = new Promise<void>((r) => (cut = r));
      const followed = follow(b, run_id, (e) => e.type === 'agent_message_delta' && ++deltas === 3 && cut());
      await midStream;
      // The api process dies: every socket closes, the port refuses connections for a while.
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
      await sleep(1_500);
      gateway = await startGateway(port, seen);

      const events = await followed;
      expectWellFormed(events);
      const t = events.at(-1)!;
      expect(t.type, JSON.stringify(t.data)).toBe('run_succeeded');
      const output = t.type === 'run_succeeded' ? (t.data.output ?? '') : '';
      expect(output.trim().split(/\s+/)).toHaveLength(60);
      expect(textOf(events)).toBe(output); // one continuous answer, nothing repeated
      expect(events.filter((e) => e.type === 'pydantic_ai_event' && e.data.event_kind === 'part_start')).toHaveLength(1);

      // The same billing request id reached the gateway twice; the ledger charged it once.
      expect(seen.filter((id) => id === `${run_id}:0`).length).toBeGreaterThanOrEqual(2);
      const rows = await db.creditLedger.findMany({ where: { agent_run_id: run_id } });
      expect(rows.map((r) => r.billing_request_id)).toEqual([`${run_id}:0`]);
      const pool = await db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenant } });
      expect(pool.quota_used).toBe(rows[0].credits);
      if (t.type === 'run_succeeded') {
        expect(t.data.usage).toMatchObject({
          model_requests: 1,
          completion_tokens: rows[0].completion_tokens,
          prompt_tokens: rows[0].prompt_tokens,
        });
      }
    } finally {
      await b.stop();
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
    }
  }, 120_000);
});
