/**
 * `npm run bench:paused` (bench/README.md "Paused turns", issue 44 item 5): many conversations waiting on ask_human at
 * once. Each conversation's first turn is `/ask …` through the public service API (streaming until
 * `human_input_required`, then the stream is dropped), `concurrency` at a time, until `turns` wait together. While
 * they fill, the api's and the worker's memory, the worker's workflow cache, PostgreSQL's rows and size and
 * Temporal's open workflows are sampled; then the forms of `sample` random waiting conversations are submitted one at
 * a time and submit → first event of the continuation → `message_end` is timed. Nothing of the code under test is
 * instrumented: /proc, process.memoryUsage(), the worker's /metrics (the SDK's sticky cache gauges), count(*) and
 * Temporal's visibility count.
 */
import { codeUnderTest } from './code-under-test.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Env } from '../core/platform/config.js';
import { parseSse } from '../core/platform/sse.js';
import type { Stack } from '../stack/start-stack.js';
import { nowMs } from './client.js';
import { DbProbe, describeMachine, type Machine } from './probes.js';
import { distribution, type Distribution } from './stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface PausedOptions {
  /** Conversations put into an ask_human pause. */
  turns: number;
  /** Pauses being made at once (closed loop). */
  concurrency: number;
  /** Forms of random paused conversations submitted afterwards, one at a time. */
  sample: number;
  /** Memory and cache sampling period while filling, ms. */
  sampleEveryMs: number;
  /** Quiet time after the last pause before the "filled" sample (lets the worker finish its last tasks), ms. */
  settleMs: number;
}

export const DEFAULT_PAUSED_OPTIONS: PausedOptions = { turns: 10_000, concurrency: 8, sample: 50, sampleEveryMs: 2_000, settleMs: 5_000 };

export interface PausedContext {
  stack: Stack;
  log: (line: string) => void;
  /** The worker child's pid (undefined: the worker runs in this process). */
  workerPid: () => number | undefined;
  /** The worker's /metrics base URL (the in-process worker's or the child's WORKER_HEALTH_PORT). */
  workerHttpUrl: string | null;
  temporal: 'dev' | 'cluster';
  /** The stack's data dir, for the dev server's SQLite file (null: not reported). */
  dataDir: string | null;
}

/** One memory sample. MB = 2^20 bytes. */
export interface MemorySample {
  /** Seconds since the fill started. */
  t: number;
  paused: number;
  /** This process: api + agent backend (+ the worker when in-process) + the load generator. */
  api: { rssMB: number; heapUsedMB: number };
  /** The worker child (null figures when the worker runs in this process: its memory is the api's). */
  worker: { rssMB: number | null; heapUsedMB: number | null };
  /** Workflows in the worker's sticky cache (temporal_sticky_cache_size, or getStatus() in process). */
  cachedWorkflows: number | null;
  /** Evictions the cache had to force so far (temporal_sticky_cache_total_forced_eviction). */
  forcedEvictions: number | null;
}

/** At 0 %, every 10 % of the fill and after the settle: memory plus the database and Temporal. */
export interface Milestone extends MemorySample {
  rows: Record<string, number>;
  rowsTotal: number;
  /** pg_database_size of every database on the server (the cluster keeps Temporal's there too), bytes. */
  databaseBytes: Record<string, number>;
  /** The dev server's SQLite files (temporal.db*), bytes (null on the cluster). */
  temporalSqliteBytes: number | null;
  /** Running workflows on the stack's task queue (Temporal visibility count). */
  openWorkflows: number | null;
}

export interface ResumeSample {
  ok: boolean;
  error?: string;
  /** POST /v1/form/human_input/{token} → its answer, ms. */
  submitMs: number | null;
  /** Submit → the first frame of the continuation's event stream, ms. */
  firstEventMs: number | null;
  firstEvent: string | null;
  /** Submit → `message_end`, ms. */
  endMs: number | null;
  /** The continuation message's status once its stream ended. */
  status: string | null;
  /** Whether the worker's cache held fewer workflows than were waiting (so this one may have been evicted). */
  cacheFull: boolean | null;
}

export interface PausedResult {
  scenario: 'paused';
  startedAt: string;
  durationS: number;
  machine: Machine;
  loadAvg: { before: number; afterFill: number; after: number };
  code?: { commit: string | null; dirty: boolean | null };
  options: PausedOptions & { temporal: 'dev' | 'cluster'; worker: 'in-process' | 'child' };
  /** WORKER_MAX_CACHED_WORKFLOWS, else the SDK's default computed from the heap limit (see maxCachedWorkflows()). */
  maxCachedWorkflows: { value: number; source: 'WORKER_MAX_CACHED_WORKFLOWS' | 'sdk default from heap limit' };
  fill: { paused: number; errors: number; errorSamples: string[]; seconds: number; pausesPerSec: number; pauseMs: Distribution };
  samples: MemorySample[];
  milestones: Milestone[];
  /** From the 0 % milestone to the settled one, divided by the paused conversations. */
  perPausedTurn: {
    rows: Record<string, number>;
    rowsTotal: number;
    databaseBytes: number;
    temporalSqliteBytes: number | null;
    apiRssKB: number;
    apiHeapKB: number;
    workerRssKB: number | null;
    workerHeapKB: number | null;
  };
  /** Worker RSS growth over the second half of the fill, KB per paused turn: ~0 when the cache evicts. */
  workerSecondHalfKBPerTurn: number | null;
  peak: { apiRssMB: number; workerRssMB: number | null };
  resumes: ResumeSample[];
  resume: { ok: number; failed: number; submit: Distribution; firstEvent: Distribution; end: Distribution };
}

interface Paused {
  user: string;
  conversationId: string;
  messageId: string;
  formToken: string;
}

const MB = 2 ** 20;
const STREAM_TIMEOUT_MS = 120_000;

export async function runPausedBench(ctx: PausedContext, opts: PausedOptions): Promise<PausedResult> {
  const { stack, log } = ctx;
  const apiKey = stack.demo!.apiKey;
  const t0 = Date.now();
  const startedAt = new Date().toISOString();
  const loadBefore = os.loadavg()[0]!;
  const db = await DbProbe.connect(stack.databaseUrl);
  const inProcess = ctx.workerPid() === undefined;
  try {
    const paused: Paused[] = [];
    const pauseMs: number[] = [];
    const errors: string[] = [];
    const samples: MemorySample[] = [];
    const milestones: Milestone[] = [];
    let peakApi = 0;
    let peakWorker: number | null = null;
    const fillStart = Date.now();
    const memory = async (): Promise<MemorySample> => {
      const s = await memorySample(ctx, inProcess, (Date.now() - fillStart) / 1000, paused.length);
      peakApi = Math.max(peakApi, s.api.rssMB);
      if (s.worker.rssMB !== null) peakWorker = Math.max(peakWorker ?? 0, s.worker.rssMB);
      return s;
    };
    const milestone = async (gc = false): Promise<Milestone> => {
      if (gc) forceGc();
      const m = await milestoneSample(ctx, db, await memory());
      milestones.push(m);
      log(
        `${m.paused} paused: api ${m.api.rssMB.toFixed(0)} MB rss / ${m.api.heapUsedMB.toFixed(0)} MB heap, worker ` +
          `${fmt(m.worker.rssMB, 0)} MB rss / ${fmt(m.worker.heapUsedMB, 0)} MB heap, cache ${m.cachedWorkflows ?? '–'} ` +
          `(evicted ${m.forcedEvictions ?? '–'}), open workflows ${m.openWorkflows ?? '–'}, rows ${m.rowsTotal}`,
      );
      return m;
    };

    await milestone(true);
    const timer = setInterval(
      () =>
        void memory().then(
          (s) => samples.push(s),
          () => undefined,
        ),
      opts.sampleEveryMs,
    );
    const marks = Array.from({ length: 9 }, (_, k) => Math.round(((k + 1) * opts.turns) / 10));
    let next = 0;
    let markBusy: Promise<unknown> = Promise.resolve();
    try {
      await Promise.all(
        Array.from({ length: Math.min(opts.concurrency, opts.turns) }, async () => {
          while (next < opts.turns) {
            const i = next++;
            const t = nowMs();
            const got = await pause(stack.apiUrl, apiKey, i);
            if (typeof got === 'string') {
              errors.push(got);
              continue;
            }
            pauseMs.push(nowMs() - t);
            paused.push(got);
            if (marks.includes(paused.length)) markBusy = markBusy.then(() => milestone());
          }
        }),
      );
    } finally {
      clearInterval(timer);
    }
    await markBusy;
    const fillSeconds = (Date.now() - fillStart) / 1000;
    log(`filled: ${paused.length} paused in ${fillSeconds.toFixed(1)} s, ${errors.length} error(s); settling ${opts.settleMs} ms`);
    await new Promise((r) => setTimeout(r, opts.settleMs));
    const filled = await milestone(true);
    const loadAfterFill = os.loadavg()[0]!;

    // The forms of random paused conversations, one at a time.
    const resumes: ResumeSample[] = [];
    for (const p of pick(paused, opts.sample)) {
      const cacheFull = filled.cachedWorkflows === null ? null : filled.cachedWorkflows < paused.length - resumes.length;
      resumes.push({ ...(await resume(stack, apiKey, p)), cacheFull });
    }
    const ok = resumes.filter((r) => r.ok);
    const first = milestones[0]!;
    const n = Math.max(1, paused.length);
    const rows: Record<string, number> = {};
    for (const [t, v] of Object.entries(filled.rows)) {
      const d = v - (first.rows[t] ?? 0);
      if (d !== 0) rows[t] = round(d / n, 3);
    }
    const dbBytes = (m: Milestone) => Object.values(m.databaseBytes).reduce((a, b) => a + b, 0);
    const half = milestones.find((m) => m.paused >= paused.length / 2 && m !== first);
    const result: PausedResult = {
      scenario: 'paused',
      startedAt,
      durationS: round((Date.now() - t0) / 1000, 1),
      machine: describeMachine(),
      loadAvg: { before: round(loadBefore, 2), afterFill: round(loadAfterFill, 2), after: round(os.loadavg()[0]!, 2) },
      options: { ...opts, temporal: ctx.temporal, worker: inProcess ? 'in-process' : 'child' },
      maxCachedWorkflows: maxCachedWorkflows(stack.config),
      fill: {
        paused: paused.length,
        errors: errors.length,
        errorSamples: errors.slice(0, 5),
        seconds: round(fillSeconds, 1),
        pausesPerSec: round(paused.length / fillSeconds, 2),
        pauseMs: distribution(pauseMs),
      },
      samples,
      milestones,
      perPausedTurn: {
        rows,
        rowsTotal: round((filled.rowsTotal - first.rowsTotal) / n, 3),
        databaseBytes: Math.round((dbBytes(filled) - dbBytes(first)) / n),
        temporalSqliteBytes:
          filled.temporalSqliteBytes === null || first.temporalSqliteBytes === null
            ? null
            : Math.round((filled.temporalSqliteBytes - first.temporalSqliteBytes) / n),
        apiRssKB: round(((filled.api.rssMB - first.api.rssMB) * 1024) / n, 1),
        apiHeapKB: round(((filled.api.heapUsedMB - first.api.heapUsedMB) * 1024) / n, 1),
        workerRssKB: perTurnKB(first.worker.rssMB, filled.worker.rssMB, n),
        workerHeapKB: perTurnKB(first.worker.heapUsedMB, filled.worker.heapUsedMB, n),
      },
      workerSecondHalfKBPerTurn:
        half && paused.length > half.paused ? perTurnKB(half.worker.rssMB, filled.worker.rssMB, paused.length - half.paused) : null,
      peak: { apiRssMB: round(peakApi, 1), workerRssMB: peakWorker === null ? null : round(peakWorker, 1) },
      resumes,
      resume: {
        ok: ok.length,
        failed: resumes.length - ok.length,
        submit: distribution(ok.map((r) => r.submitMs!)),
        firstEvent: distribution(ok.map((r) => r.firstEventMs!)),
        end: distribution(ok.map((r) => r.endMs!)),
      },
    };
    log(
      `resumed ${ok.length}/${resumes.length}: first event p50 ${fmt(result.resume.firstEvent.p50)} ms, p95 ` +
        `${fmt(result.resume.firstEvent.p95)}, max ${fmt(result.resume.firstEvent.max)}; message_end p50 ${fmt(result.resume.end.p50)} ms`,
    );
    return result;
  } finally {
    await db.close();
  }
}

/** A new conversation's `/ask` turn, streamed until its form arrives; then the stream is dropped. */
async function pause(apiUrl: string, apiKey: string, i: number): Promise<Paused | string> {
  const user = `paused-${i}`;
  const ac = new AbortController();
  const timeout = setTimeout(() => ac.abort(), STREAM_TIMEOUT_MS);
  try {
    const res = await fetch(`${apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: {}, query: `/ask Question ${i}: what should I call you?`, user, response_mode: 'streaming' }),
      signal: ac.signal,
    });
    if (res.status !== 200 || !res.body) return `pause ${i}: HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
    for await (const f of parseSse(res.body)) {
      if (f.event === 'error') return `pause ${i}: error event ${f.data.slice(0, 200)}`;
      if (f.event !== 'human_input_required') continue;
      const d = JSON.parse(f.data) as { conversation_id: string; message_id: string; data: { form_token: string } };
      return { user, conversationId: d.conversation_id, messageId: d.message_id, formToken: d.data.form_token };
    }
    return `pause ${i}: stream ended without human_input_required`;
  } catch (err) {
    return `pause ${i}: ${(err as Error).message}`;
  } finally {
    clearTimeout(timeout);
    ac.abort();
  }
}

/** Submits the form and follows the continuation to its `message_end`. */
async function resume(stack: Stack, apiKey: string, p: Paused): Promise<Omit<ResumeSample, 'cacheFull'>> {
  const out: Omit<ResumeSample, 'cacheFull'> = {
    ok: false,
    submitMs: null,
    firstEventMs: null,
    firstEvent: null,
    endMs: null,
    status: null,
  };
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  const signal = AbortSignal.timeout(STREAM_TIMEOUT_MS);
  const t = nowMs();
  try {
    const sub = await fetch(`${stack.apiUrl}/v1/form/human_input/${p.formToken}`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ inputs: { answer: `Call me ${p.user}.` }, action: 'submit', user: p.user }),
      signal,
    });
    const body = (await sub.json()) as { task_id?: string };
    out.submitMs = nowMs() - t;
    if (sub.status !== 200 || !body.task_id) return { ...out, error: `submit HTTP ${sub.status}: ${JSON.stringify(body).slice(0, 200)}` };
    const ev = await fetch(`${stack.apiUrl}/v1/chat-messages/${body.task_id}/events?user=${encodeURIComponent(p.user)}`, {
      headers,
      signal,
    });
    if (ev.status !== 200 || !ev.body) return { ...out, error: `events HTTP ${ev.status}` };
    for await (const f of parseSse(ev.body)) {
      if (f.event === 'ping') continue;
      if (out.firstEventMs === null) {
        out.firstEventMs = nowMs() - t;
        out.firstEvent = f.event ?? null;
      }
      if (f.event === 'error') return { ...out, error: `error event ${f.data.slice(0, 200)}` };
      if (f.event === 'message_end') {
        out.endMs = nowMs() - t;
        break;
      }
    }
    if (out.endMs === null) return { ...out, error: 'stream closed before message_end' };
    const row = await stack.db.message.findUnique({ where: { id: body.task_id }, select: { status: true } });
    out.status = row?.status ?? null;
    out.ok = out.status === 'succeeded';
    return out.ok ? out : { ...out, error: `continuation ended ${out.status}` };
  } catch (err) {
    return { ...out, error: (err as Error).message };
  }
}

async function memorySample(ctx: PausedContext, inProcess: boolean, t: number, paused: number): Promise<MemorySample> {
  const mem = process.memoryUsage();
  const metrics = ctx.workerHttpUrl ? await fetchText(`${ctx.workerHttpUrl}/metrics`) : null;
  const pid = ctx.workerPid();
  let cached = metrics === null ? null : metricSum(metrics, 'temporal_sticky_cache_size');
  if (inProcess && ctx.stack.worker) cached = ctx.stack.worker.worker.getStatus().numCachedWorkflows;
  const workerHeap = !inProcess && metrics !== null ? metricSum(metrics, 'nodejs_heap_size_used_bytes') : null;
  return {
    t: round(t, 1),
    paused,
    api: { rssMB: round(mem.rss / MB, 1), heapUsedMB: round(mem.heapUsed / MB, 1) },
    worker: {
      rssMB: pid === undefined ? null : vmRssMB(pid),
      heapUsedMB: workerHeap === null ? null : round(workerHeap / MB, 1),
    },
    cachedWorkflows: cached,
    forcedEvictions: metrics === null ? null : metricSum(metrics, 'temporal_sticky_cache_total_forced_eviction'),
  };
}

async function milestoneSample(ctx: PausedContext, db: DbProbe, m: MemorySample): Promise<Milestone> {
  const counters = await db.read();
  const sizes = await db.query<{ datname: string; bytes: string }>(
    `select datname, pg_database_size(datname)::text as bytes from pg_database where not datistemplate order by 1`,
    [],
  );
  const databaseBytes: Record<string, number> = {};
  for (const r of sizes.rows) databaseBytes[r.datname] = Number(r.bytes);
  let openWorkflows: number | null = null;
  try {
    const q = `TaskQueue="${ctx.stack.config.TEMPORAL_TASK_QUEUE}" AND ExecutionStatus="Running"`;
    openWorkflows = (await ctx.stack.temporal.workflow.count(q)).count;
  } catch {
    openWorkflows = null;
  }
  return {
    ...m,
    rows: counters.rows,
    rowsTotal: Object.values(counters.rows).reduce((a, b) => a + b, 0),
    databaseBytes,
    temporalSqliteBytes: ctx.temporal === 'dev' && ctx.dataDir ? sqliteBytes(path.join(ctx.dataDir, 'temporal')) : null,
    openWorkflows,
  };
}

/** The worker's sticky cache size as the SDK computes it when WORKER_MAX_CACHED_WORKFLOWS is unset (worker-options.js, reuseV8Context). */
export function maxCachedWorkflows(config: Pick<Env, 'WORKER_MAX_CACHED_WORKFLOWS'>): PausedResult['maxCachedWorkflows'] {
  if (config.WORKER_MAX_CACHED_WORKFLOWS !== undefined)
    return { value: config.WORKER_MAX_CACHED_WORKFLOWS, source: 'WORKER_MAX_CACHED_WORKFLOWS' };
  const heapMiB = v8.getHeapStatistics().heap_size_limit / MB;
  return { value: Math.max(Math.floor((Math.max(heapMiB - 200, 0) * 600) / 1024), 10), source: 'sdk default from heap limit' };
}

/** Sum of a Prometheus metric's samples over its labels (null when absent). */
export function metricSum(text: string, name: string): number | null {
  let sum: number | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== ' ' && line[name.length] !== '{')) continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) sum = (sum ?? 0) + v;
  }
  return sum;
}

async function fetchText(url: string): Promise<string | null> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return r.ok ? await r.text() : null;
  } catch {
    return null;
  }
}

function vmRssMB(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? round(Number(m[1]) / 1024, 1) : null;
  } catch {
    return null;
  }
}

function sqliteBytes(dir: string): number | null {
  try {
    return fs
      .readdirSync(dir)
      .filter((f) => f.startsWith('temporal.db'))
      .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
  } catch {
    return null;
  }
}

let gcFn: (() => void) | null = null;
/** A full GC of this process before a milestone's heap figure (the api holds nothing per paused turn once collected). */
function forceGc(): void {
  if (!gcFn) {
    v8.setFlagsFromString('--expose-gc');
    gcFn = vm.runInNewContext('gc') as () => void;
  }
  gcFn();
}

function pick<T>(xs: readonly T[], k: number): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a.slice(0, Math.min(k, a.length));
}

const perTurnKB = (a: number | null, b: number | null, n: number) => (a === null || b === null ? null : round(((b - a) * 1024) / n, 1));
const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;
const fmt = (v: number | null, digits = 1) => (v === null ? '–' : v.toFixed(digits));
const mb = (bytes: number) => (bytes / MB).toFixed(1);

export function renderPausedMarkdown(r: PausedResult): string {
  const o = r.options;
  const dist = (d: Distribution) => `${fmt(d.p50, 0)} / ${fmt(d.p95, 0)} / ${fmt(d.max, 0)}`;
  const dbTotal = (m: Milestone) => Object.values(m.databaseBytes).reduce((a, b) => a + b, 0);
  const rows = Object.entries(r.perPausedTurn.rows)
    .sort((a, b) => b[1] - a[1])
    .map(([t, v]) => `| ${t} | ${v} |`);
  return [
    `### Paused turns: ${r.fill.paused} conversations waiting on ask_human (${o.temporal === 'cluster' ? 'PostgreSQL-backed Temporal server' : 'Temporal dev server'}, worker ${o.worker})`,
    '',
    `Run ${r.startedAt}, ${r.durationS} s${r.code ? `, code ${r.code.commit}${r.code.dirty ? ' (dirty)' : ''}` : ''}. Machine: ${r.machine.cpu}, ${r.machine.cores} cores, ` +
      `${r.machine.ramGiB} GiB RAM, Node ${r.machine.node}, ${r.machine.os}. Load average (1 min) before / after the fill / after: ` +
      `${r.loadAvg.before} / ${r.loadAvg.afterFill} / ${r.loadAvg.after}.`,
    `Options: ${o.turns} turns, concurrency ${o.concurrency}, ${o.sample} resumes. Worker cache: maxCachedWorkflows ${r.maxCachedWorkflows.value} (${r.maxCachedWorkflows.source}).`,
    '',
    `Fill: ${r.fill.paused} paused in ${r.fill.seconds} s (${r.fill.pausesPerSec}/s), ${r.fill.errors} error(s); one pause (request → form event) p50 / p95 / max ${dist(r.fill.pauseMs)} ms.`,
    '',
    '| paused | api RSS / heap (MB) | worker RSS / heap (MB) | cached workflows | forced evictions | open workflows | rows | databases (MB) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...r.milestones.map(
      (m) =>
        `| ${m.paused} | ${m.api.rssMB.toFixed(0)} / ${m.api.heapUsedMB.toFixed(0)} | ${fmt(m.worker.rssMB, 0)} / ${fmt(m.worker.heapUsedMB, 0)} | ` +
        `${m.cachedWorkflows ?? '–'} | ${m.forcedEvictions ?? '–'} | ${m.openWorkflows ?? '–'} | ${m.rowsTotal} | ${mb(dbTotal(m))}` +
        `${m.temporalSqliteBytes !== null ? ` (+ SQLite ${mb(m.temporalSqliteBytes)})` : ''} |`,
    ),
    '',
    `The first row is before any pause, the last after the settle; api heap at those two after a full GC. Peak RSS sampled every ${o.sampleEveryMs} ms: api ${r.peak.apiRssMB} MB, worker ${fmt(r.peak.workerRssMB)} MB.`,
    '',
    `Per paused turn: ${r.perPausedTurn.rowsTotal} rows, ${(r.perPausedTurn.databaseBytes / 1024).toFixed(1)} KB of PostgreSQL` +
      `${r.perPausedTurn.temporalSqliteBytes !== null ? ` + ${(r.perPausedTurn.temporalSqliteBytes / 1024).toFixed(1)} KB of the dev server's SQLite` : ''}, ` +
      `api ${r.perPausedTurn.apiRssKB} KB RSS / ${r.perPausedTurn.apiHeapKB} KB heap, worker ${fmt(r.perPausedTurn.workerRssKB)} KB RSS / ` +
      `${fmt(r.perPausedTurn.workerHeapKB)} KB heap; worker RSS over the second half of the fill ${fmt(r.workerSecondHalfKBPerTurn)} KB per paused turn.`,
    '',
    '| table | rows per paused turn |',
    '|---|---:|',
    ...rows,
    '',
    `Resumes: ${r.resume.ok} of ${r.resumes.length} random paused conversations, one at a time, ${r.resumes.filter((x) => x.cacheFull).length} of them while the cache held fewer workflows than were waiting.`,
    '',
    '| submit → | p50 / p95 / max (ms) |',
    '|---|---:|',
    `| its answer (continuation's task_id) | ${dist(r.resume.submit)} |`,
    `| first event of the continuation | ${dist(r.resume.firstEvent)} |`,
    `| message_end | ${dist(r.resume.end)} |`,
    ...(r.resume.failed
      ? [
          '',
          `Failed resumes: ${r.resumes
            .filter((x) => !x.ok)
            .map((x) => x.error)
            .slice(0, 5)
            .join('; ')}`,
        ]
      : []),
  ].join('\n');
}

// ---- the CLI ------------------------------------------------------------------------------------

const USAGE = `npm run bench:paused -- [options]

  --turns N                conversations put into an ask_human pause (default ${DEFAULT_PAUSED_OPTIONS.turns})
  --concurrency C          pauses being made at once (default ${DEFAULT_PAUSED_OPTIONS.concurrency})
  --sample K               random paused conversations resumed afterwards, one at a time (default ${DEFAULT_PAUSED_OPTIONS.sample})
  --temporal SERVER        dev | cluster (default dev)
  --worker MODE            child (default: its memory apart) | in-process (as npm start)
  --max-cached-workflows M WORKER_MAX_CACHED_WORKFLOWS for the worker (default: unset, the SDK's default)
  --out FILE               JSON result (a .md next to it) (default bench/results/local/paused-<temporal>.json)
  --log-level LEVEL        stack log level (default error)
  --keep-data              keep .data/bench-<pid> afterwards
`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      turns: { type: 'string' },
      concurrency: { type: 'string' },
      sample: { type: 'string' },
      temporal: { type: 'string' },
      worker: { type: 'string' },
      'max-cached-workflows': { type: 'string' },
      out: { type: 'string' },
      'log-level': { type: 'string' },
      'keep-data': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return (console.log(USAGE), 0);
  const int = (v: string | undefined, d: number, min: number) => {
    const n = v === undefined ? d : Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`expected an integer ≥ ${min}, got ${v}\n\n${USAGE}`);
    return n;
  };
  const opts: PausedOptions = {
    ...DEFAULT_PAUSED_OPTIONS,
    turns: int(values.turns, DEFAULT_PAUSED_OPTIONS.turns, 1),
    concurrency: int(values.concurrency, DEFAULT_PAUSED_OPTIONS.concurrency, 1),
    sample: int(values.sample, DEFAULT_PAUSED_OPTIONS.sample, 0),
  };
  const temporal = (values.temporal ?? 'dev') as 'dev' | 'cluster';
  const worker = (values.worker ?? 'child') as 'child' | 'in-process';
  if (!['dev', 'cluster'].includes(temporal) || !['child', 'in-process'].includes(worker)) throw new Error(USAGE);
  const { startBenchStack } = await import('./stack.js');
  const { freePort } = await import('../stack/ports.js');
  const t0 = Date.now();
  const log = (line: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(7)} s] ${line}`);
  const workerPort = await freePort();
  // Read now: the checkout may move while a long run goes on, the code loaded stays the one of the start.
  const code = codeUnderTest();
  log(`starting the stack (embedded PostgreSQL, Temporal ${temporal}, worker ${worker}) ...`);
  const bench = await startBenchStack({
    temporal,
    worker,
    logLevel: (values['log-level'] ?? 'error') as Env['LOG_LEVEL'],
    keepData: values['keep-data'],
    env: {
      // The child's /metrics (the SDK's sticky cache gauges, its heap); the in-process worker has its own port.
      ...(worker === 'child' ? { WORKER_HEALTH_PORT: workerPort } : {}),
      ...(values['max-cached-workflows'] ? { WORKER_MAX_CACHED_WORKFLOWS: int(values['max-cached-workflows'], 0, 0) } : {}),
    },
  });
  try {
    const { stack } = bench;
    const result = await runPausedBench(
      {
        stack,
        log,
        workerPid: () => stack.workerChild?.pid,
        workerHttpUrl: worker === 'child' ? `http://127.0.0.1:${workerPort}` : stack.workerHttpUrl,
        temporal,
        dataDir: bench.dataDir,
      },
      opts,
    );
    result.code = code;
    const markdown = renderPausedMarkdown(result);
    console.log(`\n${markdown}\n`);
    const out = path.resolve(ROOT, values.out ?? `bench/results/local/paused-${temporal}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
    fs.writeFileSync(out.replace(/\.json$/, '') + '.md', markdown + '\n');
    log(`wrote ${path.relative(ROOT, out)}`);
    return result.fill.errors === 0 && result.resume.failed === 0 ? 0 : 1;
  } finally {
    await bench.stop();
    log('stack stopped');
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
