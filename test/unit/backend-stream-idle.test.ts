/**
 * A half-open backend connection (the peer gone without FIN/RST: the socket stays open, nothing arrives)
 * once stalled a turn until the activity's 2 h timeout. The event stream now has an idle limit: no byte
 * (the backend sends a keep-alive comment every SSE_PING_MS) for `streamIdleMs` and runAgent reattaches
 * from its committed cursor (issue 18 item 7). A real HTTP server plays the backend.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentBackendClient, StreamIdleError } from '../../core/protocol/backend-client.js';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { emptyUsage } from '../../core/protocol/run.js';
import { freshDatabase } from '../support/db.js';
import { attempt, preparedTurn, type ScriptedBackend } from './run-agent-harness.js';

const RUN = 'run-half-open';
const ev = (id: number, type: string, data: unknown) => ({ id: String(id), run_id: RUN, created_at: new Date().toISOString(), type, data });
const EVENTS = [
  ev(1, 'run_started', {}),
  ev(2, 'agent_message_delta', { delta: 'Hello ' }),
  ev(3, 'agent_message_delta', { delta: 'world' }),
  ev(4, 'run_succeeded', { output: 'Hello world', usage: emptyUsage(), session_snapshot: { schema_version: 1, layers: [] } }),
];

/** How each stream request behaves: `stall` sends the events up to `upTo` and then nothing, for ever. */
let script: ({ kind: 'stall'; upTo: number } | { kind: 'keepalive'; beats: number } | { kind: 'all' })[] = [];
const requests: string[] = [];
const open = new Set<http.ServerResponse>();
let server: http.Server;
let url: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/runs') {
      res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ run_id: RUN, status: 'running' }));
      return;
    }
    const u = new URL(req.url!, 'http://x');
    requests.push(u.search);
    const after = Number(u.searchParams.get('after') ?? 0);
    const step = script.shift() ?? { kind: 'all' };
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    open.add(res);
    res.on('close', () => open.delete(res));
    const send = (upTo: number) => {
      for (const e of EVENTS) if (Number(e.id) > after && Number(e.id) <= upTo) res.write(`id: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`);
    };
    if (step.kind === 'stall') return send(step.upTo);
    if (step.kind === 'all') return (send(EVENTS.length), res.end());
    let beats = 0;
    const t = setInterval(() => {
      if (beats++ < step.beats) return void res.write(': keep-alive\n\n');
      clearInterval(t);
      send(EVENTS.length);
      res.end();
    }, 100);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  for (const r of open) r.destroy();
  requests.length = 0;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function drain(client: AgentBackendClient, after: string | null) {
  const got: string[] = [];
  for await (const e of client.streamEvents(RUN, after)) got.push(e.id);
  return got;
}

describe('the backend event stream', () => {
  it('gives up on a silent connection after the idle limit', async () => {
    script = [{ kind: 'stall', upTo: 2 }];
    const client = new AgentBackendClient(url, 't', { streamIdleMs: 400 });
    const got: string[] = [];
    const err = await (async () => {
      for await (const e of client.streamEvents(RUN, null)) got.push(e.id);
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(got).toEqual(['1', '2']);
    expect(err).toBeInstanceOf(StreamIdleError);
  });

  it('keep-alive comments keep a quiet run alive past the idle limit', async () => {
    script = [{ kind: 'keepalive', beats: 8 }]; // ~800 ms of keep-alives only, twice the idle limit
    const client = new AgentBackendClient(url, 't', { streamIdleMs: 400 });
    expect(await drain(client, null)).toEqual(['1', '2', '3', '4']);
  });
});

describe('runAgent over a half-open connection', () => {
  let db: Db;
  beforeAll(async () => {
    db = createDb(await freshDatabase('backend_stream_idle'));
  });
  afterAll(async () => db?.$disconnect());

  it('reattaches from the committed cursor instead of stalling, and finishes the whole answer once', async () => {
    script = [{ kind: 'stall', upTo: 2 }, { kind: 'all' }];
    const config = loadConfig({}, { DELTA_DEBOUNCE_MS: 20 });
    const client = new AgentBackendClient(url, 't', { streamIdleMs: 500 });
    const { messageId } = await preparedTurn(db);
    const a = attempt({ db, config, logger: createLogger('idle-test', 'silent') }, client as unknown as ScriptedBackend);
    await expect(a.run(messageId)).resolves.toEqual({ status: 'succeeded' });
    // The second connection resumed after what the first delivered (and was committed).
    expect(requests).toEqual(['', '?after=2']);
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.answer]).toEqual(['succeeded', 'Hello world']);
  });
});
