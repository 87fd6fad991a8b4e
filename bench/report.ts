/**
 * Renders a BenchResult as Markdown: machine, targets, one table per workload, where the time goes. The
 * floor (bench/floor.ts) gets a column wherever it has the figure, and "extra over floor" = (durable − direct)
 * − floor, first token p50: what the durable path adds beyond what any Temporal turn of its shape costs.
 */
import type { PathName } from './client.js';
import { KEY_TABLES } from './probes.js';
import type { BenchResult, CellResult, WorkloadResult } from './runner.js';
import { stepTargetsTable, summaryTable, cpuPerTurn } from './summary.js';
import { DIRECT_SEGMENTS, DURABLE_SEGMENTS, FLOOR_SEGMENTS } from './timeline.js';

type Getter = (c: CellResult) => number | null;

interface Metric {
  label: string;
  get: Getter;
  digits?: number;
  /** Ratio column left empty (e.g. counts that are 0 on one side). */
  noRatio?: boolean;
  /** The floor has this figure (it has no api, backend, SSE or database work). */
  floor?: boolean;
}

const cpu = (k: 'main' | 'worker' | 'postgres' | 'temporal' | 'peer') => (c: CellResult) => c.cpuMsPerTurn?.[k] ?? null;
const rows = (t: string) => (c: CellResult) => c.db.rowsPerTurn[t] ?? 0;

function metrics(r: BenchResult): Metric[] {
  const workerChild = r.stack.worker === 'child process';
  const list: Metric[] = [
    { label: 'first token p50 (ms)', get: (c) => c.ttft.p50, floor: true },
    { label: 'first token p95 (ms)', get: (c) => c.ttft.p95, floor: true },
    { label: 'first token p99 (ms)', get: (c) => c.ttft.p99, floor: true },
    { label: 'message_end p50 (ms)', get: (c) => c.end.p50, floor: true },
    { label: 'message_end p95 (ms)', get: (c) => c.end.p95, floor: true },
    { label: 'message_end p99 (ms)', get: (c) => c.end.p99, floor: true },
    { label: 'turns/s', get: (c) => c.turnsPerSec, digits: 2, floor: true },
    { label: 'errors', get: (c) => c.errors, noRatio: true, floor: true },
    // Turns admission control refused with 503 + Retry-After (MAX_TURNS_IN_FLIGHT, MAX_RUNS_PER_BACKEND): shed, not failed.
    { label: 'shed (503 + Retry-After)', get: (c) => c.shed ?? 0, noRatio: true },
    { label: 'SSE frames/turn', get: (c) => c.framesPerTurn },
    { label: `peak RSS ${workerChild ? 'api+backend+client' : 'api+worker+backend+client'} (MB)`, get: (c) => c.peakRssMB.main },
  ];
  if (workerChild) list.push({ label: 'peak RSS worker child (MB)', get: (c) => c.peakRssMB.worker });
  list.push(
    { label: 'CPU/turn: all processes (ms)', get: cpuPerTurn, floor: true },
    { label: 'CPU/turn: node main (ms)', get: cpu('main'), floor: true },
    // The direct path leaves the worker idle: a ratio would only divide by its idle noise.
    ...(workerChild ? [{ label: 'CPU/turn: worker child (ms)', get: cpu('worker'), noRatio: true }] : []),
    { label: 'CPU/turn: postgres (ms)', get: cpu('postgres') },
    { label: 'CPU/turn: temporal server (ms)', get: cpu('temporal'), noRatio: true, floor: true },
    { label: 'CPU/turn: peer server (ms)', get: cpu('peer'), noRatio: true },
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

/** (durable − direct) − floor, first token p50 at concurrency c; null when a path is missing. */
export function extraOverFloor(w: WorkloadResult, c: number): number | null {
  const [d, x, f] = (['durable', 'direct', 'floor'] as const).map((p) => cell(w, p, c)?.ttft.p50 ?? null);
  if (d == null || x == null || f == null) return null;
  return Math.round((d - x - f) * 10) / 10;
}

export function workloadTable(r: BenchResult, w: WorkloadResult): string {
  // The peer's column (bench/peer.ts) when it ran: every figure but the statements of this process.
  const hasPeer = w.cells.some((x) => x.path === 'peer');
  const pc = (v: string) => (hasPeer ? ` ${v} |` : '');
  const out = [
    `| metric | conc. | durable | direct | floor |${pc('peer')} durable/direct |`,
    `|---|---:|---:|---:|---:|${pc('---:')}---:|`,
  ];
  for (const m of metrics(r)) {
    for (const c of concurrencies(w)) {
      const d = cell(w, 'durable', c);
      const x = cell(w, 'direct', c);
      const f = m.floor ? cell(w, 'floor', c) : undefined;
      const p = cell(w, 'peer', c);
      const dv = d ? m.get(d) : null;
      const xv = x ? m.get(x) : null;
      out.push(
        `| ${m.label} | ${c} | ${num(dv, m.digits)} | ${num(xv, m.digits)} | ${f ? num(m.get(f), m.digits) : ''} |${pc(p ? num(m.get(p), m.digits) : '')} ${m.noRatio ? '' : ratio(dv, xv)} |`,
      );
    }
    if (m.label === 'first token p50 (ms)') {
      for (const c of concurrencies(w))
        out.push(
          `| first token p50: extra over floor, (durable − direct) − floor (ms) | ${c} | ${num(extraOverFloor(w, c))} | | |${pc('')} |`,
        );
    }
  }
  return out.join('\n');
}

/** Median segments of the path to the first token, durable vs direct, at one concurrency. */
export function timelineTable(w: WorkloadResult, c: number): string {
  const d = cell(w, 'durable', c)?.timeline;
  const x = cell(w, 'direct', c)?.timeline;
  if (!d || !x) return '';
  // The floor's column is there when the floor ran; its workflow_start counts from the client's start call.
  const f = cell(w, 'floor', c)?.timeline;
  const fc = (v: string) => (f ? ` ${v} |` : '');
  const out = [`| c=${c}: segment (median ms) | durable | direct |${fc('floor')}`, `|---|---:|---:|${f ? '---:|' : ''}`];
  const directNames = new Set<string>(DIRECT_SEGMENTS.map(([n]) => n));
  const floorNames = new Set<string>(FLOOR_SEGMENTS.map(([n]) => n));
  for (const [name, what] of DURABLE_SEGMENTS) {
    out.push(
      `| ${name} — ${what} | ${num(d.segments[name] ?? null)} | ${directNames.has(name) ? num(x.segments[name] ?? null) : ''} |${fc(floorNames.has(name) ? num(f?.segments[name] ?? null) : '')}`,
    );
  }
  out.push(
    `| **sum (≈ first token; floor: to its activity)** | **${num(d.total)}** | **${num(x.total)}** |${fc(`**${num(f?.total ?? null)}**`)}`,
  );
  out.push(`| terminal stored in backend → client end | ${num(d.endTail)} | ${num(x.endTail)} |${fc('')}`);
  out.push(
    `| turn end: runAgent completed → workflow closed (releaseTurn, last task) | ${num(d.turnEnd ?? null)} | |${fc(num(f?.turnEnd ?? null))}`,
  );
  out.push(
    `| every frame: row → client p50 / p99 / max | ${num(d.frameLag.p50)} / ${num(d.frameLag.p99)} / ${num(d.frameLag.max)} | ${num(x.frameLag.p50)} / ${num(x.frameLag.p99)} / ${num(x.frameLag.max)} |${fc('')}`,
  );
  if (d.activities) {
    const acts = (t: typeof d) =>
      Object.entries(t.activities ?? {})
        .map(([n, a]) => `${n} ${num(a.dispatchMs)}+${num(a.execMs)}`)
        .join(', ');
    out.push(`| activities (dispatch+exec ms) | ${acts(d)} | |${fc(f ? acts(f) : '')}`);
    const tasks = (t: typeof d) => {
      const wt = t.workflowTask;
      return `${num(wt?.perTurn ?? null, 0)} (${num(wt?.scheduleToStartMs ?? null)}, ${num(wt?.startToCompleteMs ?? null)}) / ${num(t.historyEvents ?? null, 0)}`;
    };
    out.push(`| workflow tasks per turn (schedule→start, start→complete ms) / history events | ${tasks(d)} | |${fc(f ? tasks(f) : '')}`);
    const longest = (t: typeof d) =>
      t.workflowTask?.longestMs === undefined ? '–' : `${num(t.workflowTask.longestMs ?? null)} / ${t.workflowTask.over1s ?? 0}`;
    out.push(
      `| longest workflow task, schedule→complete (ms) / tasks over 1 s (sampled turns) | ${longest(d)} | |${fc(f ? longest(f) : '')}`,
    );
  }
  return out.join('\n');
}

/**
 * Issue 21's targets: c=1 plain durable first token p50 ≤ 60 ms, extra over direct ≤ floor + 10 ms; at c=32
 * plain ≥ 12 turns/s, p99 first token ≤ 1 s, zero and tool ≥ 0.75× direct; no errors. The load columns use
 * c=32, or the highest concurrency measured when 32 was not (e.g. --quick).
 */
export function targetsTable(r: BenchResult): string {
  const all = [...new Set(r.workloads.flatMap(concurrencies))];
  const lo = all.includes(1) ? 1 : Math.min(...all);
  const hi = all.includes(32) ? 32 : Math.max(...all);
  const top = Math.max(...all);
  const out = [
    `| workload | first token p50 @c=${lo}: durable / direct / floor (ms) | extra over direct | extra over floor (target ≤ 10) | ` +
      `turns/s @c=${hi}: durable / direct / floor | durable/direct (≥ 0.75) | first token p99 @c=${hi} durable (≤ 1000 ms) | errors @c=${hi} (0) | ` +
      `longest workflow task @c=${top} durable (≤ 1000 ms), errors |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const w of r.workloads) {
    const at = (c: number) => (['durable', 'direct', 'floor'] as const).map((p) => cell(w, p, c));
    const [d1, x1, f1] = at(lo);
    const [dh, xh, fh] = at(hi);
    const dt = cell(w, 'durable', top);
    const extra = d1?.ttft.p50 != null && x1?.ttft.p50 != null ? d1.ttft.p50 - x1.ttft.p50 : null;
    const tps = (c: CellResult | undefined) => num(c?.turnsPerSec ?? null, 2);
    out.push(
      `| ${w.name} | ${num(d1?.ttft.p50 ?? null)} / ${num(x1?.ttft.p50 ?? null)} / ${num(f1?.ttft.p50 ?? null)} | ${num(extra)} | ${num(extraOverFloor(w, lo))} | ` +
        `${tps(dh)} / ${tps(xh)} / ${tps(fh)} | ${ratio(dh?.turnsPerSec ?? null, xh?.turnsPerSec ?? null)} | ${num(dh?.ttft.p99 ?? null)} | ${dh ? `${dh.errors}${dh.shed ? ` (+${dh.shed} shed)` : ''}` : '–'} | ` +
        `${dt ? `${num(dt.timeline?.workflowTask?.longestMs ?? null)}, ${dt.errors}${dt.shed ? ` (+${dt.shed} shed)` : ''}` : '–'} |`,
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
    `Stack: embedded PostgreSQL, Temporal ${r.stack.temporal ?? 'dev server'}, worker ${r.stack.worker}, DEMO_MODEL_TOKEN_DELAY_MS=${r.stack.DEMO_MODEL_TOKEN_DELAY_MS}, ` +
      `DELTA_DEBOUNCE_MS=${r.stack.DELTA_DEBOUNCE_MS}, BACKEND_DELTA_COALESCE_MS=${r.stack.BACKEND_DELTA_COALESCE_MS}` +
      (r.stack.MAX_TURNS_IN_FLIGHT !== undefined
        ? `, MAX_TURNS_IN_FLIGHT=${r.stack.MAX_TURNS_IN_FLIGHT}, MAX_RUNS_PER_BACKEND=${r.stack.MAX_RUNS_PER_BACKEND}`
        : '') +
      (r.stack.METRICS_ENABLED !== undefined ? `, METRICS_ENABLED=${r.stack.METRICS_ENABLED}` : '') +
      '. ' +
      `Options: concurrency ${r.options.concurrency.join(',')}, turns/cell max(${r.options.turns}, 2×c), warm-up ${r.options.warmup}. ` +
      (r.idleCpuMsPerSec
        ? `Idle CPU (ms per s): ${Object.entries(r.idleCpuMsPerSec)
            .filter(([, v]) => v > 0)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')}. `
        : '') +
      `Peak RSS over the run (VmHWM): main ${num(r.lifetimePeakRssMB.main)} MB${r.lifetimePeakRssMB.worker !== null ? `, worker ${num(r.lifetimePeakRssMB.worker)} MB` : ''}.` +
      (r.floor
        ? ` Floor: task queue \`${r.floor.taskQueue}\`, worker in this process, eager start ${r.floor.eagerStartRequested ? 'requested' : 'off'}, ` +
          `${r.floor.eagerlyStarted}/${r.floor.started} starts eager.`
        : ''),
    '',
    '### Durable, direct, floor and peer (issue 33)',
    '',
    summaryTable(r),
    '',
    stepTargetsTable(r),
    '',
    '### Targets (issue 21)',
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
