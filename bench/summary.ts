/**
 * Issue 33's table: durable / direct / floor / peer side by side — first token p50 at c=1 (plain), turns/s and CPU per
 * turn at c=32 (plain), a turn's fixed CPU and its CPU per token (from plain's 200 and long's 2,000 tokens at the same
 * concurrency), errors at c=64 (every workload) — and the issue's step targets against them.
 *
 * Fixed and per token: CPU per turn (all processes) is modelled as fixed + tokens × per-token; two workloads that differ
 * only in their answer's length give per-token = (long − plain) / (2000 − 200) and fixed = plain − 200 × per-token.
 */
import type { PathName } from './client.js';
import type { BenchResult, CellResult } from './runner.js';

export const PLAIN_TOKENS = 200;
export const LONG_TOKENS = 2000;
const PATHS: PathName[] = ['durable', 'direct', 'floor', 'peer'];

/** Every process's CPU per turn, ms. */
export function cpuPerTurn(c: CellResult | undefined): number | null {
  if (!c?.cpuMsPerTurn) return null;
  return Object.values(c.cpuMsPerTurn).reduce<number>((a, b) => a + (b ?? 0), 0);
}

function cellOf(r: BenchResult, workload: string, path: PathName, c: number): CellResult | undefined {
  return r.workloads.find((w) => w.name === workload)?.cells.find((x) => x.path === path && x.concurrency === c);
}

/** The levels the table reads: c=1 (or the lowest), c=32 (or the highest ≤ 32, else the lowest), c=64 (or the highest). */
export function summaryLevels(r: BenchResult): { lo: number; load: number; top: number } {
  const all = [...new Set(r.workloads.flatMap((w) => w.cells.map((c) => c.concurrency)))].sort((a, b) => a - b);
  const under = all.filter((c) => c <= 32);
  return { lo: all[0] ?? 1, load: under.length ? Math.max(...under) : (all[0] ?? 1), top: all.at(-1) ?? 1 };
}

/** A path's fixed CPU per turn (ms) and CPU per token (µs) at concurrency c; the floor streams no tokens: its turn is all fixed. */
export function fixedAndPerToken(r: BenchResult, path: PathName, c: number): { fixedMs: number | null; perTokenUs: number | null } {
  const plain = cpuPerTurn(cellOf(r, 'plain', path, c));
  if (path === 'floor') return { fixedMs: plain, perTokenUs: null };
  const long = cpuPerTurn(cellOf(r, 'long', path, c));
  if (plain === null || long === null) return { fixedMs: null, perTokenUs: null };
  const perTokenMs = (long - plain) / (LONG_TOKENS - PLAIN_TOKENS);
  return { fixedMs: plain - PLAIN_TOKENS * perTokenMs, perTokenUs: perTokenMs * 1000 };
}

const n1 = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toFixed(1));
const n0 = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toFixed(0));
const n2 = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toFixed(2));

export function summaryTable(r: BenchResult): string {
  const { lo, load, top } = summaryLevels(r);
  const out = [
    `| path | first token p50, plain, c=${lo} (ms) | turns/s, plain, c=${load} | CPU/turn, plain, c=${load} (ms) | CPU/turn, long, c=${load} (ms) | ` +
      `fixed CPU/turn (ms) | CPU/token (µs) | errors, c=${top}, all workloads |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const p of PATHS) {
    const plain1 = cellOf(r, 'plain', p, lo);
    const plainL = cellOf(r, 'plain', p, load);
    const longL = cellOf(r, 'long', p, load);
    if (!plain1 && !plainL && !longL) continue;
    const { fixedMs, perTokenUs } = fixedAndPerToken(r, p, load);
    const tops = r.workloads.map((w) => w.cells.find((x) => x.path === p && x.concurrency === top)).filter((x): x is CellResult => !!x);
    const errors = tops.length ? tops.reduce((a, c) => a + c.errors, 0) : null;
    const shed = tops.reduce((a, c) => a + (c.shed ?? 0), 0);
    out.push(
      `| ${p} | ${n1(plain1?.ttft.p50)} | ${n2(plainL?.turnsPerSec)} | ${n1(cpuPerTurn(plainL))} | ${n1(cpuPerTurn(longL))} | ` +
        `${n1(fixedMs)} | ${n0(perTokenUs)} | ${errors === null ? '–' : `${errors}${shed ? ` (+${shed} shed)` : ''}`} |`,
    );
  }
  return out.join('\n');
}

/** Issue 33's step targets, each against the figure of this run. */
export function stepTargetsTable(r: BenchResult): string {
  const { lo, load, top } = summaryLevels(r);
  const dPlain = cellOf(r, 'plain', 'durable', load);
  const d1 = cellOf(r, 'plain', 'durable', lo);
  const dTok = fixedAndPerToken(r, 'durable', load).perTokenUs;
  const pTok = fixedAndPerToken(r, 'peer', load).perTokenUs;
  const tops = r.workloads
    .map((w) => w.cells.find((x) => x.path === 'durable' && x.concurrency === top))
    .filter((x): x is CellResult => !!x);
  const errors = tops.length ? tops.reduce((a, c) => a + c.errors, 0) : null;
  const mark = (ok: boolean | null) => (ok === null ? '–' : ok ? 'met' : 'not met');
  const cpu = cpuPerTurn(dPlain);
  const tokRatio = dTok !== null && pTok !== null && pTok > 0 ? dTok / pTok : null;
  const rows: [string, string, string, boolean | null][] = [
    [`durable plain CPU/turn, c=${load}`, '≤ 150 ms', n1(cpu), cpu === null ? null : cpu <= 150],
    [`durable plain turns/s, c=${load}`, '≥ 10', n2(dPlain?.turnsPerSec), dPlain ? dPlain.turnsPerSec >= 10 : null],
    [`durable first token p50, plain, c=${lo}`, '≤ 45 ms', n1(d1?.ttft.p50), d1?.ttft.p50 == null ? null : d1.ttft.p50 <= 45],
    [
      `durable CPU/token ÷ peer's, c=${load}`,
      '≤ 1.5×',
      tokRatio === null ? '–' : `${tokRatio.toFixed(2)}×`,
      tokRatio === null ? null : tokRatio <= 1.5,
    ],
    [
      `durable errors, c=${top} (shed with 503 + Retry-After allowed)`,
      '0',
      errors === null ? '–' : String(errors),
      errors === null ? null : errors === 0,
    ],
  ];
  return [
    '| target (issue 33 step) | wanted | this run | |',
    '|---|---:|---:|---|',
    ...rows.map(([a, b, c, d]) => `| ${a} | ${b} | ${c} | ${mark(d)} |`),
  ].join('\n');
}
