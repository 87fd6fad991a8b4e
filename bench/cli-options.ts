/** `npm run bench` flags (and their BENCH_* environment equivalents; flags win). */
import { parseArgs } from 'node:util';
import type { Env } from '../core/platform/config.js';
import type { PathName } from './client.js';
import { DEFAULT_OPTIONS, QUICK_OPTIONS, type BenchOptions } from './runner.js';
import { WORKLOADS } from './workloads.js';

export interface CliOptions {
  bench: BenchOptions;
  quick: boolean;
  worker: 'in-process' | 'child';
  out: string;
  /** Record the run in the tracked files: bench/README.md (between its result markers) and bench/results/latest.json. */
  record: boolean;
  /** Which Temporal server the stack runs on: the CLI's dev server (SQLite) or the PostgreSQL-backed server of `npm run cluster`. */
  temporal: 'dev' | 'cluster';
  logLevel: Env['LOG_LEVEL'];
  keepData: boolean;
  temporalCliPath?: string;
}

/** Where runs that are not recorded go: git-ignored (bench/results/.gitignore). */
export const LOCAL_RESULTS = 'bench/results/local';

export const USAGE = `npm run bench -- [options]

  --quick                 smoke run: concurrency ${QUICK_OPTIONS.concurrency.join(',')}, ${QUICK_OPTIONS.turns} turns per cell (< 60 s)
  --concurrency 1,8,32    concurrency levels              (BENCH_CONCURRENCY, default ${DEFAULT_OPTIONS.concurrency.join(',')})
  --turns N               turns per cell, at least 2×c    (BENCH_TURNS, default ${DEFAULT_OPTIONS.turns})
  --warmup N              warm-up turns per path          (BENCH_WARMUP, default ${DEFAULT_OPTIONS.warmup})
  --workloads a,b         ${WORKLOADS.map((w) => w.name).join(',')}            (BENCH_WORKLOADS)
  --paths a,b             durable,direct,floor,peer (default all; one alone: for profiling)  (BENCH_PATHS)
  --worker MODE           in-process | child              (BENCH_WORKER, default in-process)
  --temporal SERVER       dev (the Temporal dev server) | cluster (the real server on PostgreSQL, as npm run cluster)
                                                          (BENCH_TEMPORAL, default dev)
  --record                record the run: bench/README.md and bench/results/latest.json (BENCH_RECORD=1);
                          without it no tracked file changes
  --out FILE              JSON result file (a .md next to it) (default ${LOCAL_RESULTS}/latest.json, quick: quick.json;
                          with --record: bench/results/latest.json)
  --log-level LEVEL       stack log level                 (default error)
  --keep-data             keep .data/bench-<pid> afterwards
`;

export function parseCli(argv: string[], env: NodeJS.ProcessEnv): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      concurrency: { type: 'string' },
      turns: { type: 'string' },
      warmup: { type: 'string' },
      workloads: { type: 'string' },
      worker: { type: 'string' },
      paths: { type: 'string' },
      out: { type: 'string' },
      record: { type: 'boolean' },
      temporal: { type: 'string' },
      'log-level': { type: 'string' },
      'keep-data': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick ?? isTrue(env.BENCH_QUICK);
  const base = quick ? QUICK_OPTIONS : DEFAULT_OPTIONS;
  const list = (v: string | undefined) =>
    v
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const ints = (v: string | undefined, what: string) =>
    list(v)?.map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1) throw new Error(`--${what}: "${s}" is not a positive integer`);
      return n;
    });
  const one = (v: string | undefined, what: string) => ints(v, what)?.[0];
  const worker = values.worker ?? env.BENCH_WORKER ?? 'in-process';
  if (worker !== 'in-process' && worker !== 'child') throw new Error(`--worker must be in-process or child, not "${worker}"`);
  const workloads = list(values.workloads ?? env.BENCH_WORKLOADS) ?? base.workloads;
  for (const w of workloads) if (!WORKLOADS.some((x) => x.name === w)) throw new Error(`unknown workload "${w}"`);
  const temporal = parseTemporal(values.temporal ?? env.BENCH_TEMPORAL ?? 'dev');
  const record = values.record ?? isTrue(env.BENCH_RECORD);
  if (record && quick) throw new Error('--record: a --quick run is a smoke test, not a figure to record');
  return {
    bench: {
      workloads,
      concurrency: ints(values.concurrency ?? env.BENCH_CONCURRENCY, 'concurrency') ?? base.concurrency,
      turns: one(values.turns ?? env.BENCH_TURNS, 'turns') ?? base.turns,
      warmup: values.warmup === '0' || env.BENCH_WARMUP === '0' ? 0 : (one(values.warmup ?? env.BENCH_WARMUP, 'warmup') ?? base.warmup),
      timelineSample: base.timelineSample,
      idleSampleMs: base.idleSampleMs,
      paths: parsePaths(list(values.paths ?? env.BENCH_PATHS) ?? base.paths),
    },
    quick,
    worker,
    out: values.out ?? (record ? 'bench/results/latest.json' : `${LOCAL_RESULTS}/${quick ? 'quick' : 'latest'}.json`),
    record,
    temporal,
    logLevel: (values['log-level'] ?? 'error') as Env['LOG_LEVEL'],
    keepData: values['keep-data'] ?? false,
    temporalCliPath: env.TEMPORAL_CLI_PATH || undefined,
  };
}

function parsePaths(names: string[]): PathName[] {
  for (const n of names)
    if (n !== 'durable' && n !== 'direct' && n !== 'floor' && n !== 'peer') throw new Error(`--paths: unknown path "${n}"`);
  return names as PathName[];
}

function parseTemporal(v: string): 'dev' | 'cluster' {
  if (v === 'dev' || v === 'cluster') return v;
  throw new Error(`--temporal must be dev or cluster, not "${v}"`);
}

function isTrue(v: string | undefined): boolean {
  return v === '1' || v === 'true' || v === 'yes';
}
