/**
 * The measurement: for each workload, warm both paths up, capture the durable path's CreateRunRequest,
 * then run one cell per (concurrency, path) — closed loop, `concurrency` clients each sending the next
 * turn when their previous one ends — and collect latency, throughput, frames, RSS, CPU and database
 * writes per cell. The floor, durable and direct cells of one concurrency run back to back (their order
 * reverses between levels), in one process lifetime on one stack, so their ratios are what this machine says.
 *
 * Why one file: one cell's measurement is one sequence (warm-up, run, probes, settle) read best in order.
 */
import os from 'node:os';
import { maxTurnsInFlight } from '../core/platform/config.js';
import { createLogger } from '../core/platform/logger.js';
import { signExecutionContext } from '../core/protocol/exec-context.js';
import type { ExecutionContextLayerConfig } from '../core/protocol/run.js';
import type { Stack } from '../stack/start-stack.js';
import { directTurn, durableTurn, nowMs, type PathName, type TurnSample } from './client.js';
import { FLOOR_TASK_QUEUE, startFloor, type FloorHarness } from './floor.js';
import { startPeer, type PeerHarness } from './peer.js';
import { BENCH_TOKEN_DELAY_MS } from './stack.js';
import {
  CommitRecorder,
  dbDelta,
  DbProbe,
  describeMachine,
  ProcessProbe,
  RssSampler,
  statementCounter,
  type Component,
  type Machine,
} from './probes.js';
import { distribution, mean, type Distribution } from './stats.js';
import { noProgress, type ProgressFactory } from './progress.js';
import {
  DIRECT_SEGMENTS,
  DURABLE_SEGMENTS,
  FLOOR_SEGMENTS,
  directTimelines,
  durableTimelines,
  floorTimelines,
  summariseTimelines,
  type TimelineSummary,
} from './timeline.js';
import { workloadByName, type Workload } from './workloads.js';

export interface BenchOptions {
  workloads: string[];
  concurrency: number[];
  /** Turns per cell: max(turns, 2 × concurrency). */
  turns: number;
  /** Warm-up turns per path and workload (not measured). */
  warmup: number;
  /** At most this many turns per cell go through the timeline analysis. */
  timelineSample: number;
  /** Idle CPU is sampled this long before the first workload (0: skip). */
  idleSampleMs: number;
  /** Which paths to run (all four by default; one alone is for profiling). floor: bench/floor.ts; peer: bench/peer.ts. */
  paths: PathName[];
}

export const DEFAULT_OPTIONS: BenchOptions = {
  workloads: ['plain', 'long', 'tool', 'zero'],
  concurrency: [1, 8, 32, 64],
  turns: 30,
  warmup: 3,
  timelineSample: 40,
  idleSampleMs: 3000,
  paths: ['durable', 'direct', 'floor', 'peer'],
};

/** `--quick`: a smoke run (< 60 s with the stack's start-up). */
export const QUICK_OPTIONS: BenchOptions = {
  workloads: ['plain', 'tool', 'zero'],
  concurrency: [1, 4],
  turns: 3,
  warmup: 0,
  timelineSample: 8,
  idleSampleMs: 0,
  paths: ['durable', 'direct', 'floor', 'peer'],
};

export interface CellResult {
  path: PathName;
  concurrency: number;
  turns: number;
  ok: number;
  /** Failed turns (shed ones excluded). */
  errors: number;
  /** Turns refused by admission control (503 + Retry-After before anything ran): the client waited Retry-After. */
  shed?: number;
  errorSamples: string[];
  wallMs: number;
  turnsPerSec: number;
  /** Time to the first answer token, ms (floor: to its activity's start). */
  ttft: Distribution;
  /** Time to message_end (durable) / the terminal event (direct) / the workflow's end (floor), ms. */
  end: Distribution;
  framesPerTurn: number | null;
  /** Peak RSS during the cell, MB: this process (api + backend + load generator [+ in-process worker]), the worker child. */
  peakRssMB: { main: number; worker: number | null };
  /** CPU time per turn by process, ms (null where /proc is unavailable). */
  cpuMsPerTurn: Record<Component, number> | null;
  db: {
    rowsPerTurn: Record<string, number>;
    rowsTotalPerTurn: number;
    writeTransactionsPerTurn: number;
    walKBPerTurn: number;
    /** SQL statements sent by this process per turn (null when the worker runs in a child). */
    statementsPerTurn: number | null;
  };
  timeline: TimelineSummary;
}

export interface WorkloadResult {
  name: string;
  query: string;
  description: string;
  cells: CellResult[];
}

export interface BenchResult {
  version: 1;
  startedAt: string;
  durationS: number;
  machine: Machine;
  options: BenchOptions;
  stack: Record<string, string | number | boolean>;
  workloads: WorkloadResult[];
  /** CPU per second of wall time with the stack idle, ms, by process (the floor under CPU/turn). */
  idleCpuMsPerSec: Record<Component, number> | null;
  /** 1-minute load average before and after the run: other work on the machine skews every figure. */
  loadAvg: { before: number; after: number };
  /** The commit measured (set by the CLI); dirty: files outside bench/ differ from it. */
  code?: { commit: string | null; dirty: boolean | null };
  /** The floor's worker and starts (null when the floor was not run). */
  floor?: { taskQueue: string; eagerStartRequested: boolean; eagerlyStarted: number; started: number } | null;
  /** VmHWM over the whole run, MB. */
  lifetimePeakRssMB: { main: number | null; worker: number | null };
}

export interface BenchContext {
  stack: Stack;
  log: (line: string) => void;
  /** Live progress of a cell (bench/progress.ts); none by default. */
  progress?: ProgressFactory;
  /** Which Temporal server the stack runs on (`npm run bench -- --temporal`), for the result's stack description. */
  temporal?: 'dev' | 'cluster';
}

export async function runBench(ctx: BenchContext, options: BenchOptions): Promise<BenchResult> {
  const { stack, log } = ctx;
  const started = Date.now();
  const loadBefore = os.loadavg()[0]!;
  const workloads = options.workloads.map(workloadByName);
  const probe = await DbProbe.connect(stack.databaseUrl);
  const commits = await CommitRecorder.start(stack.databaseUrl, nowMs);
  const floor = options.paths.includes('floor') ? await startFloorFor(stack) : null;
  const peer = options.paths.includes('peer')
    ? await startPeer({ databaseUrl: stack.databaseUrl, tokenDelayMs: BENCH_TOKEN_DELAY_MS })
    : null;
  const procs = new ProcessProbe(
    () => stack.workerChild?.pid,
    () => peer?.pid,
  );
  const results: WorkloadResult[] = [];
  let idleCpuMsPerSec: BenchResult['idleCpuMsPerSec'] = null;
  try {
    if (procs.available && options.idleSampleMs > 0) {
      const before = procs.cpu();
      await new Promise((r) => setTimeout(r, options.idleSampleMs));
      const d = ProcessProbe.cpuDelta(before, procs.cpu());
      idleCpuMsPerSec = Object.fromEntries(Object.entries(d).map(([k, v]) => [k, round1(v / (options.idleSampleMs / 1000))])) as Record<
        Component,
        number
      >;
      log(
        `idle CPU (ms per s): ${Object.entries(idleCpuMsPerSec)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    }
    for (const w of workloads) {
      log(`workload ${w.name}: ${w.description}`);
      const { paths, directTurnOpen } = await preparePaths(stack, w, options.warmup, floor, peer);
      const cells: CellResult[] = [];
      for (const [i, c] of workloadLevels(w, options.concurrency).entries()) {
        const n = Math.max(options.turns, 2 * c);
        const order: PathName[] = i % 2 === 0 ? ['floor', 'peer', 'durable', 'direct'] : ['direct', 'durable', 'peer', 'floor'];
        for (const path of order.filter((p) => options.paths.includes(p))) {
          const progress = (ctx.progress ?? noProgress)(`${w.name} ${path} c=${c}`, n);
          if (path === 'direct') await directTurnOpen(true);
          const cell = await runCell({
            stack,
            probe,
            procs,
            commits,
            path,
            concurrency: c,
            turns: n,
            turn: paths[path]!,
            timelineSample: options.timelineSample,
            floor,
            onTurn: (done, errors) => progress.update(done, errors),
          });
          if (path === 'direct') await directTurnOpen(false);
          progress.done();
          cells.push(cell);
          log(
            `  ${path.padEnd(7)} c=${String(c).padStart(2)} n=${String(n).padStart(3)}  ttft p50 ${fmt(cell.ttft.p50)} p99 ${fmt(cell.ttft.p99)}  end p50 ${fmt(cell.end.p50)}  ${cell.turnsPerSec.toFixed(1)} turns/s  errors ${cell.errors}${cell.shed ? `  shed ${cell.shed}` : ''}`,
          );
          for (const e of cell.errorSamples) log(`    error: ${e}`);
        }
      }
      results.push({ name: w.name, query: w.query, description: w.description, cells });
    }
  } finally {
    await probe.close();
    await commits.close();
    await floor?.stop();
    await peer?.stop();
  }
  const workerPid = stack.workerChild?.pid;
  const mb = (b: number | null) => (b === null ? null : round1(b / 2 ** 20));
  return {
    version: 1,
    startedAt: new Date(started).toISOString(),
    durationS: Math.round((Date.now() - started) / 100) / 10,
    machine: describeMachine(),
    options,
    stack: {
      worker: stack.workerChild ? 'child process' : stack.worker ? 'in-process' : 'none',
      DEMO_MODEL_TOKEN_DELAY_MS: stack.config.DEMO_MODEL_TOKEN_DELAY_MS,
      DELTA_DEBOUNCE_MS: stack.config.DELTA_DEBOUNCE_MS,
      BACKEND_DELTA_COALESCE_MS: stack.config.BACKEND_DELTA_COALESCE_MS,
      MAX_TURNS_IN_FLIGHT: maxTurnsInFlight(stack.config),
      MAX_RUNS_PER_BACKEND: stack.config.MAX_RUNS_PER_BACKEND,
      METRICS_ENABLED: stack.config.METRICS_ENABLED,
      postgres: stack.config.DATABASE_URL?.includes('127.0.0.1') ? 'embedded' : 'external',
      temporal: ctx.temporal === 'cluster' ? 'PostgreSQL-backed server' : stack.temporalUiUrl ? 'dev server' : 'external',
    },
    workloads: results,
    floor: floor ? { taskQueue: FLOOR_TASK_QUEUE, eagerStartRequested: floor.eager.requested, ...floor.eager } : null,
    idleCpuMsPerSec,
    loadAvg: { before: round1(loadBefore), after: round1(os.loadavg()[0]!) },
    lifetimePeakRssMB: { main: mb(ProcessProbe.hwm(process.pid)), worker: workerPid ? mb(ProcessProbe.hwm(workerPid)) : null },
  };
}

type TurnFn = () => Promise<TurnSample>;

/** The concurrency levels a workload runs at: all of them, or for `long` (10 s turns) the one its fixed/per-token split uses. */
export function workloadLevels(w: Workload, levels: number[]): number[] {
  if (!w.onlyLoadLevel) return levels;
  const load = levels.filter((c) => c <= 32);
  return [load.length ? Math.max(...load) : Math.min(...levels)];
}

/** The floor's worker joins this process, on the stack's Temporal server, logging like the stack. */
function startFloorFor(stack: Stack): Promise<FloorHarness> {
  const level = stack.config.LOG_LEVEL;
  return startFloor({
    temporalAddress: stack.temporalAddress,
    namespace: stack.config.TEMPORAL_NAMESPACE,
    logger: createLogger('bench-floor', level),
    logLevel: level,
  });
}

/**
 * Warms both paths up and builds the direct path's request exactly like the durable path does: the
 * CreateRunRequest stored for a durable turn of this workload, minus its session snapshot and
 * idempotency key (each direct run gets a fresh key).
 */
async function preparePaths(
  stack: Stack,
  w: Workload,
  warmup: number,
  floor: FloorHarness | null,
  peer: PeerHarness | null,
): Promise<{ paths: Partial<Record<PathName, TurnFn>>; directTurnOpen: (open: boolean) => Promise<void> }> {
  const durable: TurnFn = () => durableTurn({ apiUrl: stack.apiUrl, apiKey: stack.demo!.apiKey, user: 'bench' }, w.query);
  const first = await durable();
  if (!first.ok || !first.id) throw new Error(`workload ${w.name}: the durable template turn failed: ${first.error}`);
  const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: first.id } });
  const { session_snapshot: _snapshot, idempotency_key: _key, ...template } = run.request as Record<string, unknown>;
  const { request, open: directTurnOpen } = await directRequest(stack, first.id, template);
  const direct: TurnFn = () => directTurn({ backendUrl: stack.agentBackendUrl, token: stack.config.AGENT_BACKEND_TOKEN, request });
  for (let i = 0; i < warmup; i++) {
    for (const [name, fn] of [
      ['durable', durable],
      ['direct', direct],
    ] as const) {
      if (name === 'direct') await directTurnOpen(true);
      const s = await fn();
      if (name === 'direct') await directTurnOpen(false);
      if (!s.ok) throw new Error(`workload ${w.name}: ${name} warm-up turn failed: ${s.error}`);
    }
    if (floor) await floor.turn();
    if (peer) {
      const s = await peer.turn(w.query);
      if (!s.ok) throw new Error(`workload ${w.name}: peer warm-up turn failed: ${s.error}`);
    }
  }
  const peerTurn: TurnFn | undefined = peer ? () => peer.turn(w.query) : undefined;
  return { paths: { durable, direct, ...(floor ? { floor: floor.turn } : {}), ...(peerTurn ? { peer: peerTurn } : {}) }, directTurnOpen };
}

/**
 * The template request with an execution context the api honours for direct runs: the inner LLM route serves a call
 * only with the signed context of a turn in progress (docs/PROTOCOL.md §3.1), and the template's turn has ended. So
 * the direct path gets a turn of its own — a copy of the template's message, with no backend run recorded (any run
 * may use it) — and the context re-signed for it, as the worker signs a turn's. The copy is `running` only while direct
 * turns run (`open`): admission control counts running messages, and the durable cells should not see it.
 */
async function directRequest(stack: Stack, templateMessageId: string, template: Record<string, unknown>) {
  const m = await stack.db.message.findUniqueOrThrow({ where: { id: templateMessageId } });
  const turn = await stack.db.message.create({
    data: {
      tenant_id: m.tenant_id,
      app_id: m.app_id,
      conversation_id: m.conversation_id,
      end_user_id: m.end_user_id,
      query: 'bench direct path',
      status: 'stopped',
      workflow_id: `bench-direct-${m.id}`,
    },
  });
  const composition = template.composition as { layers: { type: string; config: unknown }[] };
  const layers = composition.layers.map((l) => {
    if (l.type !== 'execution_context') return l;
    const { signature: _s, exp: _e, ...fields } = l.config as ExecutionContextLayerConfig;
    return { ...l, config: signExecutionContext({ ...fields, message_id: turn.id }, stack.config.EXECUTION_CONTEXT_SIGNING_KEY) };
  });
  const open = async (on: boolean) => {
    await stack.db.message.update({ where: { id: turn.id }, data: { status: on ? 'running' : 'stopped' } });
  };
  return { request: { ...template, composition: { ...composition, layers } }, open };
}

async function runCell(a: {
  stack: Stack;
  probe: DbProbe;
  procs: ProcessProbe;
  commits: CommitRecorder;
  path: PathName;
  concurrency: number;
  turns: number;
  turn: TurnFn;
  timelineSample: number;
  floor: FloorHarness | null;
  /** Told after every turn: turns done, errors so far. */
  onTurn?: (done: number, errors: number) => void;
}): Promise<CellResult> {
  const { stack, probe, procs, commits } = a;
  commits.clear();
  const statements = statementCounter();
  const dbBefore = await probe.read();
  const statementsBefore = statements();
  const cpuBefore = procs.available ? procs.cpu() : null;
  const rss = new RssSampler(procs);
  rss.start();
  const samples: TurnSample[] = [];
  const t0 = nowMs();
  let next = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: a.concurrency }, async () => {
      while (next < a.turns) {
        next += 1;
        const s = await a.turn();
        samples.push(s);
        if (!s.ok && !s.shed) errors += 1;
        a.onTurn?.(samples.length, errors);
        // A shed client does what a well-behaved one does: waits the Retry-After it was given, then sends its next turn.
        if (s.shed) await new Promise((r) => setTimeout(r, s.shed!.retryAfterS * 1000));
      }
    }),
  );
  const lastEnd = Math.max(...samples.map((s) => s.startAt + (s.endMs ?? 0)), t0);
  const wallMs = lastEnd - t0;
  // The turn's remaining work (the workflow's releaseTurn, backend run bookkeeping) belongs to its cost.
  if (a.path === 'durable') await settleWorkflows(stack, samples);
  await new Promise((r) => setTimeout(r, 300));
  rss.stop();
  const cpuAfter = procs.available ? procs.cpu() : null;
  const statementsAfter = statements();
  const dbAfter = await probe.read();

  const ok = samples.filter((s) => s.ok);
  const db = dbDelta(dbBefore, dbAfter);
  const per = (v: number) => round1(v / a.turns);
  const sample = ok.slice(0, a.timelineSample);
  // The peer keeps no row times of its own to line up (its checkpoints are blobs): no timeline.
  const tl =
    a.path === 'durable'
      ? await durableTimelines(stack.temporal, probe, commits, sample)
      : a.path === 'floor'
        ? await floorTimelines(a.floor!.client, sample)
        : a.path === 'peer'
          ? { turns: [], frameLags: [] }
          : await directTimelines(probe, commits, sample);
  const segments = a.path === 'durable' ? DURABLE_SEGMENTS : a.path === 'floor' ? FLOOR_SEGMENTS : DIRECT_SEGMENTS;
  const cpu = cpuBefore && cpuAfter ? ProcessProbe.cpuDelta(cpuBefore, cpuAfter) : null;
  return {
    path: a.path,
    concurrency: a.concurrency,
    turns: a.turns,
    ok: ok.length,
    errors: samples.filter((s) => !s.ok && !s.shed).length,
    shed: samples.filter((s) => s.shed).length,
    errorSamples: [...new Set(samples.filter((s) => !s.ok && !s.shed).map((s) => s.error ?? 'unknown'))].slice(0, 3),
    wallMs: round1(wallMs),
    turnsPerSec: Math.round((ok.length / (wallMs / 1000)) * 100) / 100,
    ttft: roundDist(distribution(ok.map((s) => s.ttftMs!))),
    end: roundDist(distribution(ok.map((s) => s.endMs!))),
    framesPerTurn: a.path === 'floor' ? null : round1n(mean(ok.map((s) => s.frames))),
    peakRssMB: { main: round1(rss.peakMain / 2 ** 20), worker: rss.peakWorker === null ? null : round1(rss.peakWorker / 2 ** 20) },
    cpuMsPerTurn: cpu ? (Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, per(v)])) as Record<Component, number>) : null,
    db: {
      rowsPerTurn: Object.fromEntries(Object.entries(db.rows).map(([k, v]) => [k, per(v)])),
      rowsTotalPerTurn: per(db.rowsTotal),
      writeTransactionsPerTurn: per(db.writeTransactions),
      walKBPerTurn: per(db.walBytes / 1024),
      statementsPerTurn: stack.workerChild || a.path === 'peer' ? null : per(statementsAfter - statementsBefore),
    },
    timeline: summariseTimelines(tl.turns, tl.frameLags, segments),
  };
}

/** Waits until every durable turn's workflow has closed (bounded). */
async function settleWorkflows(stack: Stack, samples: TurnSample[]): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise((r) => (timer = setTimeout(r, 60_000)));
  const all = Promise.all(
    samples
      .filter((s) => s.id)
      .map((s) =>
        stack.temporal.workflow
          .getHandle(`agent-turn-${s.id}`)
          .result()
          .catch(() => undefined),
      ),
  );
  await Promise.race([all, deadline]);
  clearTimeout(timer);
}

function fmt(v: number | null): string {
  return v === null ? '   -' : `${v.toFixed(0).padStart(5)} ms`;
}

function round1(v: number): number {
  return Math.round(v * 10) / 10;
}

function round1n(v: number | null): number | null {
  return v === null ? null : round1(v);
}

function roundDist(d: Distribution): Distribution {
  const r = (v: number | null) => (v === null ? null : round1(v));
  return { n: d.n, p50: r(d.p50), p95: r(d.p95), p99: r(d.p99), max: r(d.max) };
}
