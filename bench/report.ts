/** Renders a BenchResult as Markdown: machine, targets, one table per workload, where the time goes. */
import type { PathName } from './client.js';
import { KEY_TABLES } from './probes.js';
import type { BenchResult, CellResult, WorkloadResult } from './runner.js';
import { DIRECT_SEGMENTS, DURABLE_SEGMENTS } from './timeline.js';

type Getter = (c: CellResult) => number | null;

interface Metric {
  label: string;
  get: Getter;
  digits?: number;
  /** Ratio column left empty (e.g. counts that are 0 on one side). */
  noRatio?: boolean;
}

const cpu = (k: 'main' | 'worker' | 'postgres' | 'temporal') => (c: CellResult) => c.cpuMsPerTurn?.[k] ?? null;
const rows = (t: string) => (c: CellResult) => c.db.rowsPerTurn[t] ?? 0;

function metrics(r: BenchResult): Metric[] {
  const workerChild = r.stack.worker === 'child process';
  const list: Metric[] = [
    { label: 'first token p50 (ms)', get: (c) => c.ttft.p50 },
    { label: 'first token p95 (ms)', get: (c) => c.ttft.p95 },
    { label: 'first token p99 (ms)', get: (c) => c.ttft.p99 },
    { label: 'message_end p50 (ms)', get: (c) => c.end.p50 },
    { label: 'message_end p95 (ms)', get: (c) => c.end.p95 },
    { label: 'message_end p99 (ms)', get: (c) => c.end.p99 },
    { label: 'turns/s', get: (c) => c.turnsPerSec, digits: 2 },
    { label: 'errors', get: (c) => c.errors, noRatio: true },
    { label: 'SSE frames/turn', get: (c) => c.framesPerTurn },
    { label: `peak RSS ${workerChild ? 'api+backend+client' : 'api+worker+backend+client'} (MB)`, get: (c) => c.peakRssMB.main },
  ];
  if (workerChild) list.push({ label: 'peak RSS worker child (MB)', get: (c) => c.peakRssMB.worker });
  list.push(
    { label: 'CPU/turn: node main (ms)', get: cpu('main') },
    // The direct path leaves the worker idle: a ratio would only divide by its idle noise.
    ...(workerChild ? [{ label: 'CPU/turn: worker child (ms)', get: cpu('worker'), noRatio: true }] : []),
    { label: 'CPU/turn: postgres (ms)', get: cpu('postgres') },
    { label: 'CPU/turn: temporal server (ms)', get: cpu('temporal'), noRatio: true },
    { label: 'DB rows inserted/turn', get: (c) => c.db.rowsTotalPerTurn },
    ...KEY_TABLES.map((t) => ({ label: `  rows/turn ${t.replace('public.', '')}`, get: rows(t), noRatio: true })),
    { label: 'SQL statements/turn (this process)', get: (c) => c.db.statementsPerTurn },
    { label: 'DB write transactions/turn', get: (c) => c.db.writeTransactionsPerTurn },
    { label: 'WAL KB/turn', get: (c) => c.db.walKBPerTurn },
  );
  return list;
}

function num(v: number | null, digits = 1): string {
  if (v === null || Number.isNaN(v)) return '–';
  return v.toFixed(digits);
}

function ratio(a: number | null, b: number | null): string {
  if (a === null || b === null || b === 0) return '–';
  return `${(a / b).toFixed(2)}×`;
}

function cell(w: WorkloadResult, path: PathName, c: number): CellResult | undefined {
  return w.cells.find((x) => x.path === path && x.concurrency === c);
}

function concurrencies(w: WorkloadResult): number[] {
  return [...new Set(w.cells.map((c) => c.concurrency))];
}

export function workloadTable(r: BenchResult, w: WorkloadResult): string {
  const out = ['| metric | conc. | durable | direct | durable/direct |', '|---|---:|---:|---:|---:|'];
  for (const m of metrics(r)) {
    for (const c of concurrencies(w)) {
      const d = cell(w, 'durable', c);
      const x = cell(w, 'direct', c);
      const dv = d ? m.get(d) : null;
      const xv = x ? m.get(x) : null;
      out.push(`| ${m.label} | ${c} | ${num(dv, m.digits)} | ${num(xv, m.digits)} | ${m.noRatio ? '' : ratio(dv, xv)} |`);
    }
  }
  return out.join('\n');
}

/** Median segments of the path to the first token, durable vs direct, at one concurrency. */
export function timelineTable(w: WorkloadResult, c: number): string {
  const d = cell(w, 'durable', c)?.timeline;
  const x = cell(w, 'direct', c)?.timeline;
  if (!d || !x) return '';
  const out = [`| c=${c}: segment (median ms) | durable | direct |`, '|---|---:|---:|'];
  const directNames = new Set<string>(DIRECT_SEGMENTS.map(([n]) => n));
  for (const [name, what] of DURABLE_SEGMENTS) {
    out.push(`| ${name} — ${what} | ${num(d.segments[name] ?? null)} | ${directNames.has(name) ? num(x.segments[name] ?? null) : ''} |`);
  }
  out.push(`| **sum (≈ first token)** | **${num(d.total)}** | **${num(x.total)}** |`);
  out.push(`| terminal stored in backend → client end | ${num(d.endTail)} | ${num(x.endTail)} |`);
  out.push(
    `| every frame: row → client p50 / p99 / max | ${num(d.frameLag.p50)} / ${num(d.frameLag.p99)} / ${num(d.frameLag.max)} | ${num(x.frameLag.p50)} / ${num(x.frameLag.p99)} / ${num(x.frameLag.max)} |`,
  );
  if (d.activities) {
    const acts = Object.entries(d.activities)
      .map(([n, a]) => `${n} ${num(a.dispatchMs)}+${num(a.execMs)}`)
      .join(', ');
    out.push(`| activities (dispatch+exec ms) | ${acts} | |`);
    const wt = d.workflowTask;
    out.push(
      `| workflow tasks per turn (schedule→start, start→complete ms) / history events | ${num(wt?.perTurn ?? null, 0)} (${num(wt?.scheduleToStartMs ?? null)}, ${num(wt?.startToCompleteMs ?? null)}) / ${num(d.historyEvents ?? null, 0)} | |`,
    );
  }
  return out.join('\n');
}

export function targetsTable(r: BenchResult): string {
  const out = [
    '| workload | extra first token p50 @c=1 (target ≤ 25 ms) | turns/s @c=32 (≥ 30) | first token p99 @c=32 (≤ 300 ms) | errors @c=32 (0) |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const w of r.workloads) {
    const d1 = cell(w, 'durable', 1);
    const x1 = cell(w, 'direct', 1);
    const d32 = cell(w, 'durable', 32);
    const extra = d1?.ttft.p50 != null && x1?.ttft.p50 != null ? d1.ttft.p50 - x1.ttft.p50 : null;
    out.push(
      `| ${w.name} | ${num(extra)} | ${num(d32?.turnsPerSec ?? null, 2)} | ${num(d32?.ttft.p99 ?? null)} | ${d32 ? d32.errors : '–'} |`,
    );
  }
  return out.join('\n');
}

export function renderMarkdown(r: BenchResult): string {
  const m = r.machine;
  const parts = [
    `Run ${r.startedAt}, ${r.durationS} s. Machine: ${m.cpu}, ${m.cores} cores, ${m.ramGiB} GiB RAM, Node ${m.node}, ${m.os}. ` +
      `Load average (1 min) before / after: ${r.loadAvg.before} / ${r.loadAvg.after}.` +
      (r.code?.commit ? ` Code: ${r.code.commit}${r.code.dirty ? ' with uncommitted changes outside bench/' : ''}.` : ''),
    `Stack: embedded PostgreSQL, Temporal dev server, worker ${r.stack.worker}, DEMO_MODEL_TOKEN_DELAY_MS=${r.stack.DEMO_MODEL_TOKEN_DELAY_MS}, ` +
      `DELTA_DEBOUNCE_MS=${r.stack.DELTA_DEBOUNCE_MS}, BACKEND_DELTA_COALESCE_MS=${r.stack.BACKEND_DELTA_COALESCE_MS}. ` +
      `Options: concurrency ${r.options.concurrency.join(',')}, turns/cell max(${r.options.turns}, 2×c), warm-up ${r.options.warmup}. ` +
      (r.idleCpuMsPerSec
        ? `Idle CPU (ms per s): ${Object.entries(r.idleCpuMsPerSec)
            .filter(([, v]) => v > 0)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')}. `
        : '') +
      `Peak RSS over the run (VmHWM): main ${num(r.lifetimePeakRssMB.main)} MB${r.lifetimePeakRssMB.worker !== null ? `, worker ${num(r.lifetimePeakRssMB.worker)} MB` : ''}.`,
    '',
    '### Targets',
    '',
    targetsTable(r),
  ];
  for (const w of r.workloads) {
    const cs = concurrencies(w);
    parts.push('', `### ${w.name}: ${w.description} — \`${w.query}\``, '', workloadTable(r, w), '');
    for (const c of [...new Set([cs[0]!, cs[cs.length - 1]!])]) parts.push(timelineTable(w, c), '');
  }
  return parts.join('\n');
}
