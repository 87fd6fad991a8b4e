/**
 * `npm run bench:compare -- a.json b.json …` — the figures that judge a change, one line per result file and workload,
 * every ratio taken inside its own run: first token extra over the floor at the lowest concurrency, turns/s durable
 * over direct, CPU per turn durable minus direct (all processes) and statements / write transactions per durable turn
 * at the highest. Made for an interleaved A/B on a machine whose speed drifts (bench/README.md "Findings now"):
 * run two checkouts alternately with the same options, then compare the files.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { BenchResult, CellResult } from './runner.js';

const files = process.argv.slice(2).filter((a) => a !== '--');
if (files.length === 0) {
  console.error('usage: npm run bench:compare -- <result.json> [<result.json> …]');
  process.exit(2);
}

const cpu = (c: CellResult) => Object.values(c.cpuMsPerTurn ?? {}).reduce<number>((a, b) => a + (b ?? 0), 0);
const f1 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1));

console.log(
  '| file | workload | c | first token p50 durable / direct / floor (ms) | extra over floor | c | turns/s durable / direct | durable/direct | CPU/turn durable − direct (ms) | statements / write tx per durable turn |',
);
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const file of files) {
  const r = JSON.parse(fs.readFileSync(file, 'utf8')) as BenchResult;
  for (const w of r.workloads) {
    const cell = (p: string, c: number) => w.cells.find((x) => x.path === p && x.concurrency === c);
    const levels = [...new Set(w.cells.map((x) => x.concurrency))].sort((a, b) => a - b);
    const lo = levels[0]!;
    const hi = levels.at(-1)!;
    const [d1, r1, fl1] = [cell('durable', lo), cell('direct', lo), cell('floor', lo)];
    const [dh, rh] = [cell('durable', hi), cell('direct', hi)];
    const p50 = (c: CellResult | undefined) => c?.ttft.p50 ?? null;
    const [a, b, f] = [p50(d1), p50(r1), p50(fl1)];
    const extra = a !== null && b !== null && f !== null ? a - b - f : null;
    console.log(
      `| ${path.basename(file)} | ${w.name} | ${lo} | ${f1(d1?.ttft.p50)} / ${f1(r1?.ttft.p50)} / ${f1(fl1?.ttft.p50)} | ${f1(extra)} | ${hi} | ` +
        `${dh?.turnsPerSec.toFixed(2) ?? '–'} / ${rh?.turnsPerSec.toFixed(2) ?? '–'} | ${dh && rh ? (dh.turnsPerSec / rh.turnsPerSec).toFixed(2) + '×' : '–'} | ` +
        `${dh && rh ? f1(cpu(dh) - cpu(rh)) : '–'} | ${f1(dh?.db?.statementsPerTurn)} / ${f1(dh?.db?.writeTransactionsPerTurn)} |`,
    );
  }
}
