/**
 * The benchmark proper (run.ts makes sure the Prisma client exists first): what durability costs.
 * Starts the stack on embedded defaults in `.data/bench-<pid>`, runs every workload through the durable path (api → Temporal workflow → agent backend) and the direct
 * path (agent backend alone, same composition) and the Temporal floor (bench/floor.ts) side by side, prints
 * the tables and writes the JSON result (git-ignored unless --record, which also records the run in
 * bench/README.md). See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { codeUnderTest } from './code-under-test.js';
import { parseCli, USAGE } from './cli-options.js';
import { progressTo } from './progress.js';
import { renderMarkdown } from './report.js';
import { renderKnowledgeMarkdown, runKnowledgeBench } from './knowledge.js';
import { runBench } from './runner.js';
import { stepTargetsTable, summaryTable } from './summary.js';
import { startBenchStack } from './stack.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const README = path.join(ROOT, 'bench', 'README.md');
const START = '<!-- bench:results:start -->';
const END = '<!-- bench:results:end -->';

let cli;
try {
  cli = parseCli(process.argv.slice(2), process.env);
} catch (err) {
  console.error(`${(err as Error).message}\n\n${USAGE}`);
  process.exit(2);
}

const t0 = Date.now();
const log = (line: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}`);
const load = os.loadavg()[0]!;
if (load > 1) log(`note: load average ${load.toFixed(1)} before the run; other work on this machine skews every figure`);
const temporalName = cli.temporal === 'cluster' ? 'the PostgreSQL-backed Temporal server (4 services)' : 'Temporal dev server';
log(`starting the stack (embedded PostgreSQL, ${temporalName}, api, agent backend, worker ${cli.worker}) ...`);
const bench = await startBenchStack({
  temporal: cli.temporal,
  worker: cli.worker,
  logLevel: cli.logLevel,
  keepData: cli.keepData,
  temporalCliPath: cli.temporalCliPath,
});
let exitCode = 0;
try {
  log(`stack up: api ${bench.stack.apiUrl}, agent backend ${bench.stack.agentBackendUrl}, data ${path.relative(ROOT, bench.dataDir)}`);
  const progress = progressTo(process.stdout);
  // BENCH_CPU_PROFILE=<file>: a CPU profile of this process (api, agent backend, the in-process worker's activities, the
  // load generator) over the measured cells only, for Chrome DevTools / speedscope (node --cpu-prof also covers the
  // stack's start-up and the tsx loader, which swamp a short run).
  const profiler = process.env.BENCH_CPU_PROFILE ? await startProfile() : null;
  const main = await runBench({ stack: bench.stack, log, progress, temporal: cli.temporal }, cli.bench);
  if (profiler) log(`wrote the CPU profile ${await profiler(path.resolve(process.env.BENCH_CPU_PROFILE!))}`);
  // The knowledge workload (bench/README.md "Knowledge"): c=1 and c=32 (quick: 1 and 4); BENCH_KNOWLEDGE=0 skips it.
  const knowledge =
    process.env.BENCH_KNOWLEDGE === '0'
      ? []
      : await runKnowledgeBench(bench.stack, { concurrency: cli.quick ? [1, 4] : [1, 32], turns: cli.quick ? 3 : 16 }, log);
  const result = { ...main, knowledge, code: codeUnderTest() };
  const markdown = renderMarkdown(result) + (knowledge.length ? `\n\n${renderKnowledgeMarkdown(knowledge)}` : '');
  console.log(`\n${markdown}`);
  const out = path.resolve(ROOT, cli.out);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
  fs.writeFileSync(out.replace(/\.json$/, '') + '.md', markdown + '\n');
  log(`wrote ${path.relative(ROOT, out)}`);
  // The table issue 33 asks for, last, so a terminal shows it without scrolling.
  console.log(
    `\nDurable, direct, floor and peer (load average before / after: ${result.loadAvg.before} / ${result.loadAvg.after}):\n\n${summaryTable(result)}\n\n${stepTargetsTable(result)}\n`,
  );
  if (cli.record) {
    const readme = fs.readFileSync(README, 'utf8');
    const a = readme.indexOf(START);
    const b = readme.indexOf(END);
    if (a >= 0 && b > a) {
      // The README keeps the run's header and the issue-33 tables (it stays short); every table goes to bench/results/latest.*.
      const header = markdown.split('\n\n').slice(0, 2).join('\n\n');
      const short = `${header}\n\n${summaryTable(result)}\n\n${stepTargetsTable(result)}`;
      fs.writeFileSync(README, `${readme.slice(0, a + START.length)}\n${short}\n${readme.slice(b)}`);
      const latest = path.join(ROOT, 'bench', 'results', 'latest');
      fs.writeFileSync(`${latest}.json`, JSON.stringify(result, null, 2) + '\n');
      fs.writeFileSync(`${latest}.md`, markdown + '\n');
      log('recorded the run in bench/README.md (summary) and bench/results/latest.{json,md} (every table)');
    }
  }
  const errors = result.workloads.flatMap((w) => w.cells).reduce((n, c) => n + c.errors, 0) + knowledge.reduce((n, c) => n + c.errors, 0);
  if (errors > 0) {
    log(`${errors} turn(s) failed`);
    exitCode = 1;
  }
} catch (err) {
  console.error(err);
  exitCode = 1;
} finally {
  await bench.stop();
  log('stack stopped');
}
process.exit(exitCode);

async function startProfile(): Promise<(file: string) => Promise<string>> {
  const inspector = await import('node:inspector/promises');
  const session = new inspector.Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
  return async (file) => {
    const { profile } = await session.post('Profiler.stop');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    return file;
  };
}
