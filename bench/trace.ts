/**
 * `npm run bench:trace` — every SQL statement and backend HTTP call of one durable turn, in order, with its start
 * and duration relative to the client's request (bench/README.md "Tracing one turn"). Where the statement counts of
 * the benchmark say *how many* round trips a turn makes, this says *which*, and which of them wait on each other:
 * the critical path to the first token is the chain of statements that do not overlap.
 *
 * The same stack as the benchmark (bench/stack.ts, worker in-process); `--turns N` traces N turns after a warm-up
 * (each a new conversation, like the benchmark's; `--follow-up` sends them into one conversation instead) and prints the
 * last. `--query` sets the workload (default the zero workload).
 * `--worker child` puts the worker in its own process.
 */
import pg from 'pg';
import { parseSse } from '../core/platform/sse.js';
import { startBenchStack } from './stack.js';
import { nowMs } from './client.js';

interface Op {
  at: number;
  ms: number;
  what: string;
}

const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] ? argv[i + 1]! : dflt;
};
const turns = Number(arg('turns', '3'));
const query = arg('query', '/slow 0 /long 20');
const followUp = argv.includes('--follow-up');
const worker = arg('worker', 'in-process') as 'in-process' | 'child';

let ops: Op[] | null = null;
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  const first = args[0] as string | { text?: string };
  const text = (typeof first === 'string' ? first : (first?.text ?? '?')).replace(/\s+/g, ' ').trim();
  const at = nowMs();
  const rec = ops;
  const done = (failed: boolean) => rec?.push({ at, ms: nowMs() - at, what: `sql${failed ? ' (failed)' : ''} ${text.slice(0, 150)}` });
  // Callback style (pg.Pool#query calls it so), a submittable (cursor) or a promise.
  const cb = args.map((a) => typeof a).lastIndexOf('function');
  if (cb >= 0) {
    const orig = args[cb] as (...a: unknown[]) => unknown;
    args[cb] = (err: unknown, ...rest: unknown[]) => (done(!!err), orig(err, ...rest));
  }
  const r = original.apply(this, args) as Promise<unknown> | undefined;
  if (cb < 0 && r && typeof (r as Promise<unknown>).then === 'function')
    (r as Promise<unknown>).then(
      () => done(false),
      () => done(true),
    );
  return r;
};
const realFetch = globalThis.fetch;
globalThis.fetch = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
  const at = nowMs();
  const rec = ops;
  const res = await realFetch(input, init);
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  rec?.push({ at, ms: nowMs() - at, what: `http ${init?.method ?? 'GET'} ${url.replace(/^https?:\/\/[^/]+/, '')} → headers` });
  return res;
};

const bench = await startBenchStack({ worker, logLevel: 'error' });

try {
  const stack = bench.stack;
  let conversationId = '';
  for (let i = 0; i < turns + 2; i += 1) {
    const traced = i === turns + 1;
    const rec: Op[] = [];
    ops = traced ? rec : null;
    const t0 = nowMs();
    const res = await realFetch(`${stack.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: {},
        query,
        user: 'trace',
        response_mode: 'streaming',
        conversation_id: followUp ? conversationId : '',
      }),
    });
    let first = 0;
    let end = 0;
    for await (const f of parseSse(res.body!)) {
      const data = JSON.parse(f.data) as { conversation_id?: string };
      if (data.conversation_id) conversationId = data.conversation_id;
      if (f.event === 'agent_message' && !first) first = nowMs() - t0;
      if (f.event === 'message_end' || f.event === 'error') {
        end = nowMs() - t0;
        break;
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    ops = null;
    if (!traced) continue;
    console.log(`turn ${i}: first token ${first.toFixed(1)} ms, end ${end.toFixed(1)} ms; ${rec.length} operations`);
    for (const o of rec.sort((a, b) => a.at - b.at))
      console.log(`${(o.at - t0).toFixed(1).padStart(8)} ${o.ms.toFixed(1).padStart(6)}  ${o.what}`);
  }
} finally {
  await bench.stop();
}
