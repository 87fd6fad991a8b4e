/**
 * Issue 47, "a revoked app key's already-open stream and running turn go on": revoking a key
 * (DELETE /console/api/apps/{app_id}/api-keys/{key_id}) ends every stream opened with it — on the replica that served
 * the revoke and on any other, through the api_tokens trigger's NOTIFY and each replica's credential watch
 * (api/credential-watch.ts) — with a last `error` event `api_key_revoked` (401); the turn goes on and is stored, unless
 * `?stop_turns=true` stops it the way the stop endpoint does. Real stack over HTTP+SSE, a second api process on the
 * same database, the demo model's slow answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CREDENTIAL_WATCH_APPLICATION } from '../../api/credential-watch.js';
import { freePort } from '../../stack/ports.js';
import { configToEnv, type Stack } from '../../stack/start-stack.js';
import { FrameReader, postChat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = path.join(inject('testDataDir'), 'i47-key-revocation');
/** 200 tokens at 50 ms: a turn that is still answering long after its stream was cut. */
const SLOW = '/slow 50 /long 200';

let stack: Stack;
let replica: { url: string; child: ChildProcess };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(200);
  }
}

const consoleCall = (p: string, method = 'GET', body?: unknown) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
    method,
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function newKey(name: string): Promise<{ id: string; key: string }> {
  const res = await consoleCall('/api-keys', 'POST', { name });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; key: string };
}

/** A streaming turn, read until its answer has started (its turn runs): the reader, its task id and what was read. */
async function openTurn(apiUrl: string, key: string, user: string) {
  const res = await postChat(apiUrl, key, { query: SLOW, user });
  expect(res.status).toBe(200);
  const reader = new FrameReader(res);
  const head = await reader.read((f) => f.event === 'agent_message');
  expect(head.at(-1)?.event).toBe('agent_message');
  return { reader, head, taskId: head[0]!.data.task_id as string, conversationId: head[0]!.data.conversation_id as string };
}

/** The stream's last frame is the revoke's error, and it came before the turn's end. */
function expectEndedByRevoke(frames: ClientFrame[], taskId: string) {
  const last = frames.at(-1)!;
  expect(
    last.event,
    `the last events: ${frames
      .slice(-3)
      .map((f) => f.event)
      .join(', ')}`,
  ).toBe('error');
  expect(last.data).toMatchObject({ event: 'error', code: 'api_key_revoked', status: 401, task_id: taskId, message_id: taskId });
  expect(last.id, 'not an event of the log').toBeUndefined();
  expect(frames.some((f) => f.event === 'message_end' || f.event === 'message')).toBe(false);
}

const message = (id: string) => stack.db.message.findUniqueOrThrow({ where: { id } });
const settled = (id: string) =>
  eventually(`message ${id} settled`, async () => {
    const m = await message(id);
    return ['succeeded', 'stopped', 'failed'].includes(m.status) ? m : null;
  });

const readyz = (url: string) =>
  fetch(`${url}/readyz`).then(async (r) => ({
    status: r.status,
    checks: ((await r.json()) as { checks: Record<string, boolean> }).checks,
  }));

/**
 * A separate api process, as in production, on this stack's database, Temporal and agent backend; handed out once its
 * /readyz says ready (its credential watch listens), or with `until: 'healthz'` as soon as it serves.
 */
async function startReplica(
  opts: { name?: string; env?: Record<string, string>; until?: 'readyz' | 'healthz' } = {},
): Promise<{ url: string; child: ChildProcess }> {
  const apiPort = await freePort();
  fs.mkdirSync(dataDir, { recursive: true });
  const log = fs.openSync(path.join(dataDir, `${opts.name ?? 'api-replica'}.log`), 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'api/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...configToEnv(stack.config),
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      AGENT_BACKEND_URL: stack.agentBackendUrl,
      API_PORT: String(apiPort),
      API_INTERNAL_URL: '',
      ...opts.env,
    },
    stdio: ['ignore', log, log],
  });
  const url = `http://127.0.0.1:${apiPort}`;
  const until = opts.until ?? 'readyz';
  await eventually(`the replica answers /${until}`, () =>
    fetch(`${url}/${until}`).then(
      (r) => r.ok,
      () => false,
    ),
  );
  return { url, child };
}

async function stopReplica(r: { child: ChildProcess } | undefined): Promise<void> {
  if (r?.child.exitCode !== null || r.child.signalCode !== null) return;
  const gone = once(r.child, 'exit');
  r.child.kill('SIGTERM');
  await gone;
}

/**
 * PostgreSQL behind a TCP relay that, while `holding`, never answers the connections of credential watches (their
 * startup message names application_name CREDENTIAL_WATCH_APPLICATION): what a server too loaded to accept looks like
 * to the watch, whose connect then times out. Every other connection is relayed as is.
 */
class WatchHoldingRelay {
  holding = true;
  /** Held watch connections the client gave up on (its connect timed out). */
  gaveUp = 0;
  private readonly gaveUpEvents = new EventTarget();
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.relay(client));
  constructor(private readonly upstream: { host: string; port: number }) {}

  async start(): Promise<number> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Resolves once a held watch connection was given up by its client. */
  nextGiveUp(): Promise<void> {
    return new Promise((resolve) => this.gaveUpEvents.addEventListener('gave-up', () => resolve(), { once: true }));
  }

  private relay(client: net.Socket): void {
    this.sockets.add(client);
    client.once('data', (first) => {
      if (this.holding && first.includes(CREDENTIAL_WATCH_APPLICATION)) {
        client.on('close', () => {
          this.gaveUp++;
          this.gaveUpEvents.dispatchEvent(new Event('gave-up'));
        });
        return;
      }
      const up = net.connect(this.upstream.port, this.upstream.host);
      this.sockets.add(up);
      up.write(first);
      client.pipe(up).pipe(client);
      const close = () => {
        client.destroy();
        up.destroy();
      };
      client.on('error', close).on('close', close);
      up.on('error', close).on('close', close);
    });
    client.on('error', () => client.destroy());
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

beforeAll(async () => {
  stack = await startTestStack('i47_revoke', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  replica = await startReplica();
});

afterAll(async () => {
  await stopReplica(replica);
  await stack?.stop();
});

describe('revoking an app key', () => {
  it('ends its open streams (chat and re-attach) with api_key_revoked; the turn goes on and is stored', async () => {
    const { id, key } = await newKey('streams');
    const turn = await openTurn(stack.apiUrl, key, 'rita');
    const reattach = await fetch(`${stack.apiUrl}/v1/chat-messages/${turn.taskId}/events?user=rita`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(reattach.status).toBe(200);
    const again = new FrameReader(reattach);
    await again.read((f) => f.event === 'agent_message');
    expect((await message(turn.taskId)).api_token_id).toBe(id);

    const revoke = await consoleCall(`/api-keys/${id}`, 'DELETE');
    expect(revoke.status).toBe(204);
    expectEndedByRevoke([...turn.head, ...(await turn.reader.read())], turn.taskId);
    expectEndedByRevoke(await again.read(), turn.taskId);

    // Durability: the turn was not stopped by the revoke; it finishes and is stored whole.
    const done = await settled(turn.taskId);
    expect(done.status).toBe('succeeded');
    expect(done.answer.trim().split(/\s+/)).toHaveLength(200);
    const end = await stack.db.messageEvent.findFirst({ where: { message_id: turn.taskId, event: 'message_end' } });
    expect(end).not.toBeNull();
    // And the key is refused from now on, also on the other replica.
    const refused = await fetch(`${replica.url}/v1/info`, { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(401);
  });

  it('with ?stop_turns=true also stops the running turn it started: stopped, usage saved, and the response lists it', async () => {
    const { id, key } = await newKey('stop');
    const turn = await openTurn(stack.apiUrl, key, 'stan');
    const revoke = await consoleCall(`/api-keys/${id}?stop_turns=true`, 'DELETE');
    expect(revoke.status).toBe(200);
    expect(await revoke.json()).toEqual({
      result: 'success',
      stopped_turns: [{ task_id: turn.taskId, conversation_id: turn.conversationId, status: 'running' }],
    });
    expectEndedByRevoke([...turn.head, ...(await turn.reader.read())], turn.taskId);

    const done = await settled(turn.taskId);
    expect(done.status).toBe('stopped');
    const words = done.answer.trim().split(/\s+/).length;
    expect(words).toBeGreaterThan(0);
    expect(words).toBeLessThan(200);
    expect(done.usage).not.toBeNull();
    expect(done.answer_tokens).toBeGreaterThan(0);
    expect(done.total_tokens).toBeGreaterThan(0);
    const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: turn.taskId } });
    expect(run.terminal_type).toBe('run_cancelled');
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: turn.conversationId } });
    expect(conv.active_message_id).toBeNull();
    // A bad value is a 400 naming the field, not a silent default.
    const bad = await consoleCall(`/api-keys/${id}?stop_turns=yes`, 'DELETE');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'invalid_param' });
  });

  it('ends the stream another api replica serves (its own watch, told by the NOTIFY)', async () => {
    const { id, key } = await newKey('replica');
    const turn = await openTurn(replica.url, key, 'rhea');
    // The revoke is served by the stack's api, not by the replica that holds the stream.
    expect((await consoleCall(`/api-keys/${id}`, 'DELETE')).status).toBe(204);
    expectEndedByRevoke([...turn.head, ...(await turn.reader.read())], turn.taskId);
    expect((await settled(turn.taskId)).status).toBe('succeeded');
  });

  it("leaves the streams of the app's other keys alone", async () => {
    const revoked = await newKey('revoked');
    const kept = await newKey('kept');
    const a = await openTurn(stack.apiUrl, revoked.key, 'otto');
    const b = await openTurn(stack.apiUrl, kept.key, 'otto');
    expect((await consoleCall(`/api-keys/${revoked.id}`, 'DELETE')).status).toBe(204);
    expectEndedByRevoke([...a.head, ...(await a.reader.read())], a.taskId);
    const rest = [...b.head, ...(await b.reader.read())];
    expect(rest.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    expect(rest.some((f) => f.event === 'error')).toBe(false);
    expect((await settled(b.taskId)).status).toBe('succeeded');
  });

  it('ends a blocking request waiting for its answer with 401 api_key_revoked', async () => {
    const { id, key } = await newKey('blocking');
    const pending = postChat(stack.apiUrl, key, { query: SLOW, user: 'bea', response_mode: 'blocking' });
    const running = await eventually('the blocking turn runs', () =>
      stack.db.message.findFirst({ where: { api_token_id: id, status: 'running' } }),
    );
    expect((await consoleCall(`/api-keys/${id}`, 'DELETE')).status).toBe(204);
    const res = await pending;
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'api_key_revoked', status: 401 });
    expect((await settled(running.id)).status).toBe('succeeded');
  });

  it('ends a stream whose revoke was missed while the watch was disconnected, once it reconnects', async () => {
    const { id, key } = await newKey('missed');
    const turn = await openTurn(stack.apiUrl, key, 'mia');
    const db = stack.db;
    // A revoke whose NOTIFY nobody gets: the trigger does not fire in a replica-role session (as if sent while the
    // watch was disconnected) ...
    await db.$transaction([
      db.$executeRawUnsafe(`set local session_replication_role = replica`),
      db.apiToken.update({ where: { id }, data: { revoked_at: new Date() } }),
    ]);
    // ... then PostgreSQL drops the watches' connections: each reconnects, and reads the keys of its open streams.
    const killed = await db.$queryRaw<{ ok: boolean }[]>`
      select pg_terminate_backend(pid) as ok from pg_stat_activity
      where application_name = ${CREDENTIAL_WATCH_APPLICATION} and datname = current_database()`;
    expect(killed.length).toBeGreaterThanOrEqual(1);
    expectEndedByRevoke([...turn.head, ...(await turn.reader.read())], turn.taskId);
    expect((await settled(turn.taskId)).status).toBe('succeeded');
  });

  it('an api whose watch cannot listen yet is not ready (/readyz 503 credential_watch: false), retries, and then ends a revoked stream', async () => {
    const pgUrl = new URL(stack.databaseUrl);
    const relay = new WatchHoldingRelay({ host: pgUrl.hostname, port: Number(pgUrl.port) });
    const relayUrl = new URL(stack.databaseUrl);
    relayUrl.hostname = '127.0.0.1';
    relayUrl.port = String(await relay.start());
    let late: { url: string; child: ChildProcess } | undefined;
    try {
      const firstGiveUp = relay.nextGiveUp();
      // The api serves (/healthz) after its watch's first attempt, which times out here.
      late = await startReplica({
        name: 'api-late-watch',
        env: { DATABASE_URL: relayUrl.toString(), PG_LISTEN_CONNECT_TIMEOUT_MS: '1000' },
        until: 'healthz',
      });
      await firstGiveUp;
      const notReady = await readyz(late.url);
      expect(notReady.checks).toMatchObject({ database: true, credential_watch: false });
      expect(notReady.status).toBe(503);

      // The server accepts again: the watch's retries get through, and the api says it is ready.
      relay.holding = false;
      let last = notReady;
      await eventually('the late api is ready', async () => (last = await readyz(late!.url)).status === 200).catch((err: Error) => {
        throw new Error(`${err.message}; its last /readyz: ${JSON.stringify(last)}`);
      });
      expect(relay.gaveUp).toBeGreaterThanOrEqual(1);

      const { id, key } = await newKey('late-watch');
      const turn = await openTurn(late.url, key, 'lena');
      expect((await consoleCall(`/api-keys/${id}`, 'DELETE')).status).toBe(204);
      expectEndedByRevoke([...turn.head, ...(await turn.reader.read())], turn.taskId);
      expect((await settled(turn.taskId)).status).toBe('succeeded');
    } finally {
      await stopReplica(late);
      await relay.stop();
    }
    // A process of its own to start and stop, on a machine that may be loaded.
  }, 180_000);
});
