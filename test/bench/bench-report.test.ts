/**
 * The benchmark's pure parts, without a stack: its command line (nothing tracked is written unless
 * --record; --temporal dev or cluster), the floor column and "extra over floor" of the
 * report, and the progress line.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LOCAL_RESULTS, parseCli } from '../../bench/cli-options.js';
import type { PathName } from '../../bench/client.js';
import { compareTable } from '../../bench/compare-table.js';
import { progressLine, progressTo } from '../../bench/progress.js';
import { extraOverFloor, renderMarkdown, targetsTable, workloadTable } from '../../bench/report.js';
import { fixedAndPerToken, stepTargetsTable, summaryTable } from '../../bench/summary.js';
import type { BenchResult, CellResult, WorkloadResult } from '../../bench/runner.js';

describe('npm run bench options', () => {
  it('writes a git-ignored local result and records nothing by default', () => {
    const cli = parseCli([], {});
    expect(cli.record).toBe(false);
    expect(cli.out).toBe(`${LOCAL_RESULTS}/latest.json`);
    expect(parseCli(['--quick'], {}).out).toBe(`${LOCAL_RESULTS}/quick.json`);
    expect(cli.bench.paths).toEqual(['durable', 'direct', 'floor', 'peer']);
    expect(cli.bench.workloads).toEqual(['plain', 'long', 'tool', 'zero']);
    expect(parseCli(['--quick'], {}).bench.workloads).not.toContain('long');
    expect(cli.temporal).toBe('dev');
  });

  it('records into the tracked files only when asked, by flag or BENCH_RECORD=1', () => {
    for (const cli of [parseCli(['--record'], {}), parseCli([], { BENCH_RECORD: '1' })]) {
      expect(cli.record).toBe(true);
      expect(cli.out).toBe('bench/results/latest.json');
    }
    expect(parseCli(['--record', '--out', 'bench/results/worker-child.json'], {}).out).toBe('bench/results/worker-child.json');
    expect(() => parseCli(['--record', '--quick'], {})).toThrow(/--record: a --quick run is a smoke test/);
  });

  it("takes the floor as a path, and the cluster's PostgreSQL-backed Temporal server as --temporal cluster", () => {
    expect(parseCli(['--paths', 'floor,durable'], {}).bench.paths).toEqual(['floor', 'durable']);
    expect(parseCli(['--paths', 'peer'], {}).bench.paths).toEqual(['peer']);
    expect(() => parseCli(['--paths', 'langgraph'], {})).toThrow(/unknown path "langgraph"/);
    expect(parseCli([], {}).temporal).toBe('dev');
    expect(parseCli(['--temporal', 'cluster'], {}).temporal).toBe('cluster');
    expect(parseCli([], { BENCH_TEMPORAL: 'cluster' }).temporal).toBe('cluster');
    expect(() => parseCli(['--temporal', 'cloud'], {})).toThrow(/--temporal must be dev or cluster/);
  });
});

function cellOf(path: PathName, concurrency: number, ttftP50: number, turnsPerSec: number): CellResult {
  const dist = (p50: number) => ({ n: 10, p50, p95: p50 + 5, p99: p50 + 9, max: p50 + 10 });
  return {
    path,
    concurrency,
    turns: 10,
    ok: 10,
    errors: 0,
    errorSamples: [],
    wallMs: 1000,
    turnsPerSec,
    ttft: dist(ttftP50),
    end: dist(ttftP50 + 100),
    framesPerTurn: path === 'floor' ? null : 4,
    peakRssMB: { main: 500, worker: null },
    cpuMsPerTurn: { main: 30, worker: 0, postgres: path === 'floor' ? 0 : 10, temporal: 20, peer: 0, other: 0 },
    db: { rowsPerTurn: {}, rowsTotalPerTurn: path === 'floor' ? 0 : 7, writeTransactionsPerTurn: 1, walKBPerTurn: 1, statementsPerTurn: 3 },
    timeline: {
      turns: 10,
      segments:
        path === 'floor'
          ? { workflow_start: 4, first_task: 0.1, prepare_turn: 2.5, first_task_completion: 6, run_agent_dispatch: 0.2 }
          : {},
      total: ttftP50,
      endTail: null,
      turnEnd: path === 'direct' ? undefined : 7.5,
      frameLag: { n: 0, p50: null, p95: null, p99: null, max: null },
      ...(path === 'direct'
        ? {}
        : {
            activities: {},
            workflowTask: {
              perTurn: 2,
              scheduleToStartMs: 1,
              startToCompleteMs: 5,
              longestMs: concurrency * 40,
              over1s: concurrency > 16 ? 3 : 0,
            },
            historyEvents: 12,
          }),
    },
  };
}

const workload: WorkloadResult = {
  name: 'plain',
  query: '/slow 5 /long 200',
  description: 'plain',
  cells: [
    cellOf('floor', 1, 22, 40),
    cellOf('durable', 1, 242, 4),
    cellOf('direct', 1, 141, 7),
    cellOf('direct', 32, 900, 5.2),
    cellOf('durable', 32, 2000, 2.1),
    cellOf('floor', 32, 120, 22.3),
  ],
};

const result: BenchResult = {
  version: 1,
  startedAt: '2026-12-01T00:00:00.000Z',
  durationS: 1,
  machine: { cpu: 'test', cores: 2, ramGiB: 4, node: 'v20', os: 'linux' } as BenchResult['machine'],
  options: {
    workloads: ['plain'],
    concurrency: [1, 32],
    turns: 10,
    warmup: 0,
    timelineSample: 8,
    idleSampleMs: 0,
    paths: ['durable', 'direct', 'floor'],
  },
  stack: { worker: 'in-process', DEMO_MODEL_TOKEN_DELAY_MS: 5, DELTA_DEBOUNCE_MS: 50, BACKEND_DELTA_COALESCE_MS: 100 },
  workloads: [workload],
  floor: { taskQueue: 'bench-floor', eagerStartRequested: true, eagerlyStarted: 60, started: 60 },
  idleCpuMsPerSec: null,
  loadAvg: { before: 1, after: 1 },
  lifetimePeakRssMB: { main: 500, worker: null },
};

describe('the report with the floor', () => {
  it('computes extra over floor as (durable − direct) − floor, first token p50', () => {
    expect(extraOverFloor(workload, 1)).toBe(79);
    expect(extraOverFloor(workload, 32)).toBe(980);
    expect(extraOverFloor({ ...workload, cells: workload.cells.filter((c) => c.path !== 'floor') }, 1)).toBeNull();
  });

  it('gives the floor a column where it has the figure, blank where it has none', () => {
    const table = workloadTable(result, workload);
    expect(table).toContain('| metric | conc. | durable | direct | floor | durable/direct |');
    expect(table).toContain('| first token p50 (ms) | 1 | 242.0 | 141.0 | 22.0 | 1.72× |');
    expect(table).toContain('| turns/s | 32 | 2.10 | 5.20 | 22.30 | 0.40× |');
    expect(table).toContain('| first token p50: extra over floor, (durable − direct) − floor (ms) | 1 | 79.0 | | | |');
    // No api, no backend, no SSE: the floor's cell stays empty rather than showing a 0 that reads as a figure.
    expect(table).toMatch(/\| SSE frames\/turn \| 1 \| 4\.0 \| 4\.0 \| {2}\| 1\.00× \|/);
  });

  it('puts the floor and extra over floor into the targets and the timeline', () => {
    const targets = targetsTable(result);
    expect(targets).toContain('extra over floor (target ≤ 10)');
    expect(targets).toContain('| plain | 242.0 / 141.0 / 22.0 | 101.0 | 79.0 | 2.10 / 5.20 / 22.30 | 0.40× | 2009.0 | 0 | 1280.0, 0 |');
    expect(targets).toContain('longest workflow task @c=32 durable (≤ 1000 ms), errors');
    const md = renderMarkdown(result);
    expect(md).toContain('| c=1: segment (median ms) | durable | direct | floor |');
    expect(md).toMatch(/\| prepare_turn — [^|]+ \| – \| {2}\| 2\.5 \|/);
    expect(md).toContain('Floor: task queue `bench-floor`, worker in this process, eager start requested, 60/60 starts eager.');
    expect(md).toContain('| longest workflow task, schedule→complete (ms) / tasks over 1 s (sampled turns) | 40.0 / 0 | | 40.0 / 0 |');
  });
});

describe("issue 33's table: durable, direct, floor and peer, fixed and per token", () => {
  const cpu = (main: number) => ({ main, worker: 0, postgres: 0, temporal: 0, peer: 0, other: 0 });
  const at = (path: PathName, c: number, ttft: number, tps: number, cpuMs: number, errors = 0) => ({
    ...cellOf(path, c, ttft, tps),
    cpuMsPerTurn: cpu(cpuMs),
    errors,
  });
  const r: BenchResult = {
    ...result,
    workloads: [
      {
        name: 'plain',
        query: '/slow 5 /long 200',
        description: 'plain',
        cells: [
          at('durable', 1, 80, 1, 300),
          at('peer', 1, 15, 1, 60),
          at('floor', 1, 16, 30, 44),
          at('durable', 32, 900, 6, 250),
          at('peer', 32, 200, 20, 45),
          at('floor', 32, 100, 33, 44),
          at('durable', 64, 2000, 6, 260, 2),
          at('peer', 64, 300, 20, 50),
        ],
      },
      {
        name: 'long',
        query: '/slow 5 /long 2000',
        description: 'long',
        cells: [at('durable', 32, 900, 2, 1150), at('peer', 32, 200, 3, 225)],
      },
    ],
  };

  it('splits CPU per turn into fixed + tokens × per token from plain (200) and long (2,000) at the same concurrency', () => {
    // durable: (1150 − 250) / 1800 = 0.5 ms per token, fixed 250 − 100 = 150 ms; peer: 0.1 ms per token, fixed 25 ms.
    expect(fixedAndPerToken(r, 'durable', 32)).toEqual({ fixedMs: 150, perTokenUs: 500 });
    expect(fixedAndPerToken(r, 'peer', 32)).toEqual({ fixedMs: 25, perTokenUs: 100 });
    expect(fixedAndPerToken(r, 'floor', 32)).toEqual({ fixedMs: 44, perTokenUs: null });
    expect(fixedAndPerToken(r, 'direct', 32)).toEqual({ fixedMs: null, perTokenUs: null });
  });

  it('prints one row per path that ran and the step targets against this run', () => {
    const t = summaryTable(r);
    expect(t).toContain('| durable | 80.0 | 6.00 | 250.0 | 1150.0 | 150.0 | 500 | 2 |');
    expect(t).toContain('| peer | 15.0 | 20.00 | 45.0 | 225.0 | 25.0 | 100 | 0 |');
    expect(t).toContain('| floor | 16.0 | 33.00 | 44.0 | – | 44.0 | – | – |');
    expect(t).not.toContain('| direct |');
    const s = stepTargetsTable(r);
    expect(s).toContain("| durable CPU/token ÷ peer's, c=32 | ≤ 1.5× | 5.00× | not met |");
    expect(s).toContain('| durable plain CPU/turn, c=32 | ≤ 150 ms | 250.0 | not met |');
    expect(s).toContain('| durable errors, c=64 (shed with 503 + Retry-After allowed) | 0 | 2 | not met |');
    expect(renderMarkdown(r)).toContain('| metric | conc. | durable | direct | floor | peer | durable/direct |');
  });
});

describe('progress', () => {
  it('renders one line per cell: label, bar, turns done / total, errors, elapsed', () => {
    expect(progressLine({ label: 'plain durable c=32', done: 16, total: 64, errors: 1, elapsedMs: 4100 }, 8)).toBe(
      '  plain durable c=32 [##------] 16/64 turns  1 error  4.1 s',
    );
    expect(progressLine({ label: 'zero floor c=1', done: 3, total: 30, errors: 0, elapsedMs: 0 }, 0)).toBe(
      '  zero floor c=1  3/30 turns  0 errors  0.0 s',
    );
  });

  it('redraws one line in place on a terminal and clears it at the end', () => {
    const chunks: string[] = [];
    let t = 0;
    const p = progressTo({ isTTY: true, columns: 200, write: (c) => chunks.push(c) }, { now: () => t })('plain durable c=1', 2);
    t = 500;
    p.update(1, 0);
    p.update(2, 0);
    p.done();
    expect(chunks.every((c) => c.startsWith('\r\x1b[2K') && !c.includes('\n'))).toBe(true);
    expect(chunks.at(-2)).toContain(' 2/2 turns');
    expect(chunks.at(-1)).toBe('\r\x1b[2K');
  });

  it('writes a plain line now and then when not on a terminal, and none for a short cell', () => {
    const lines: string[] = [];
    let t = 0;
    const factory = progressTo({ isTTY: false, write: (c) => lines.push(c) }, { now: () => t, plainEveryMs: 1000 });
    const short = factory('tool direct c=4', 8);
    short.update(8, 0);
    short.done();
    expect(lines).toEqual([]);
    const long = factory('plain durable c=64', 128);
    t = 1500;
    long.update(40, 2);
    t = 1600;
    long.update(41, 2);
    expect(lines).toEqual(['  plain durable c=64  40/128 turns  2 errors  1.5 s\n']);
  });
});

describe('npm run bench:compare', () => {
  it("lines up each result's own ratios: the session A/B of 2026-12-01 as recorded", () => {
    const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../bench/results/ab-2026-12-01');
    const load = (n: string) => ({ name: n, result: JSON.parse(fs.readFileSync(path.join(dir, `${n}.json`), 'utf8')) });
    const rows = compareTable([load('old-1'), load('new-1')]);
    expect(rows).toHaveLength(2 + 6);
    expect(rows).toContain('| old-1 | plain | 1 | 118.5 / 32.4 / 28.1 | 58.0 | 32 | 4.25 / 8.07 | 0.53× | 199.3 | 207.6 / 83.3 |');
    expect(rows).toContain('| new-1 | zero | 1 | 117.9 / 52.4 / 25.4 | 40.1 | 32 | 9.08 / 16.68 | 0.54× | 111.1 | 74.7 / 22.5 |');
  });
});
