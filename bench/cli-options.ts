/** `npm run bench` flags (and their BENCH_* environment equivalents; flags win). */
import { parseArgs } from 'node:util';
import type { Env } from '../core/config.js';
import type { PathName } from './client.js';
import { DEFAULT_OPTIONS, QUICK_OPTIONS, type BenchOptions } from './runner.js';
import { WORKLOADS } from './workloads.js';

export interface CliOptions {
  bench: BenchOptions;
  quick: boolean;
  worker: 'in-process' | 'child';
  out: string;
  /** Write the run into bench/README.md (between its result markers). */
  record: boolean;
  logLevel: Env['LOG_LEVEL'];
  keepData: boolean;
  temporalCliPath?: string;
}

export const USAGE = `npm run bench -- [options]

  --quick                 smoke run: concurrency ${QUICK_OPTIONS.concurrency.join(',')}, ${QUICK_OPTIONS.turns} turns per cell (< 60 s)
  --concurrency 1,8,32    concurrency levels              (BENCH_CONCURRENCY, default ${DEFAULT_OPTIONS.concurrency.join(',')})
  --turns N               turns per cell, at least 2×c    (BENCH_TURNS, default ${DEFAULT_OPTIONS.turns})
  --warmup N              warm-up turns per path          (BENCH_WARMUP, default ${DEFAULT_OPTIONS.warmup})
  --workloads a,b         ${WORKLOADS.map((w) => w.name).join(',')}            (BENCH_WORKLOADS)
  --paths a,b             durable,direct (one alone: for profiling)
  --worker MODE           in-process | child              (BENCH_WORKER, default in-process)
  --out FILE              JSON result file                (default bench/results/latest.json; quick: quick.json)
  --no-record             do not write the run into bench/README.md (quick runs never do)
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
      'no-record': { type: 'boolean' },
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
    out: values.out ?? (quick ? 'bench/results/quick.json' : 'bench/results/latest.json'),
    record: !quick && !values['no-record'],
    logLevel: (values['log-level'] ?? 'error') as Env['LOG_LEVEL'],
    keepData: values['keep-data'] ?? false,
    temporalCliPath: env.TEMPORAL_CLI_PATH || undefined,
  };
}

function parsePaths(names: string[]): PathName[] {
  for (const n of names) if (n !== 'durable' && n !== 'direct') throw new Error(`--paths: unknown path "${n}"`);
  return names as PathName[];
}

function isTrue(v: string | undefined): boolean {
  return v === '1' || v === 'true' || v === 'yes';
}
