/** The table of `npm run bench:compare` (bench/compare.ts), apart so it can be tested on recorded files. */
import type { BenchResult, CellResult } from './runner.js';

const cpu = (c: CellResult) => Object.values(c.cpuMsPerTurn ?? {}).reduce<number>((a, b) => a + (b ?? 0), 0);
const f1 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1));
const f2 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(2));

/** One Markdown row per result and workload: extra over floor at the lowest concurrency, the rest at the highest. */
export function compareTable(results: { name: string; result: BenchResult }[]): string[] {
  const out = [
    '| file | workload | c | first token p50 durable / direct / floor (ms) | extra over floor | c | turns/s durable / direct | durable/direct | CPU/turn durable − direct (ms) | statements / write tx per durable turn |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const { name, result: r } of results) {
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
      out.push(
        `| ${name} | ${w.name} | ${lo} | ${f1(a)} / ${f1(b)} / ${f1(f)} | ${f1(extra)} | ${hi} | ` +
          `${f2(dh?.turnsPerSec)} / ${f2(rh?.turnsPerSec)} | ${dh && rh ? (dh.turnsPerSec / rh.turnsPerSec).toFixed(2) + '×' : '–'} | ` +
          `${dh && rh ? f1(cpu(dh) - cpu(rh)) : '–'} | ${f1(dh?.db?.statementsPerTurn)} / ${f1(dh?.db?.writeTransactionsPerTurn)} |`,
      );
    }
  }
  return out;
}
