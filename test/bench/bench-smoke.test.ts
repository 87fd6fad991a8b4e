/**
 * The benchmark harness, smoke-tested: its quick mode against a real stack, two turns per path at
 * concurrency 1, must produce figures for the durable and direct paths, the Temporal floor and the LangGraph.js peer
 * of every workload and no failed turn. No timing is asserted: absolute numbers are the benchmark's business, not a test's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderMarkdown } from '../../bench/report.js';
import { QUICK_OPTIONS, runBench, type BenchResult } from '../../bench/runner.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let result: BenchResult;

beforeAll(async () => {
  stack = await startTestStack('bench_smoke');
  result = await runBench({ stack, log: () => undefined }, { ...QUICK_OPTIONS, concurrency: [1], turns: 2, warmup: 0 });
}, 180_000);
afterAll(async () => stack?.stop());

describe('npm run bench --quick, two turns per path at concurrency 1', () => {
  it('measures every workload through the durable path, the direct path, the floor and the peer without a failed turn', () => {
    expect(result.workloads.map((w) => w.name)).toEqual(QUICK_OPTIONS.workloads);
    for (const w of result.workloads) {
      expect(w.cells.map((c) => `${c.path}@${c.concurrency}`).sort()).toEqual(['direct@1', 'durable@1', 'floor@1', 'peer@1']);
      for (const c of w.cells) {
        expect({ workload: w.name, path: c.path, ok: c.ok, errors: c.errors, errorSamples: c.errorSamples }).toEqual({
          workload: w.name,
          path: c.path,
          ok: 2,
          errors: 0,
          errorSamples: [],
        });
      }
    }
  });

  it('reports latency, throughput, frames, memory and database writes for each cell', () => {
    for (const c of result.workloads.flatMap((w) => w.cells).filter((x) => x.path === 'durable' || x.path === 'direct')) {
      for (const v of [
        c.ttft.p50,
        c.ttft.p99,
        c.end.p50,
        c.end.p99,
        c.turnsPerSec,
        c.framesPerTurn,
        c.peakRssMB.main,
        c.db.rowsTotalPerTurn,
      ]) {
        expect(v).toBeTypeOf('number');
        expect(v).toBeGreaterThan(0);
      }
      // Both paths run the agent backend, so both store its run and events.
      expect(c.db.rowsPerTurn['agent_backend.events']).toBeGreaterThan(0);
      expect(c.timeline.total).toBeGreaterThan(0);
    }
    const durable = result.workloads[0]!.cells.find((c) => c.path === 'durable')!;
    expect(durable.db.rowsPerTurn['public.message_events']).toBeGreaterThan(0);
    expect(durable.timeline.activities?.runAgent).toBeDefined();
    // The turn's preparation runs inside runAgent (booked in backend_create): no local activity in the first task.
    expect(durable.timeline.segments.prepare_turn ?? null).toBeNull();
    expect(durable.timeline.segments.first_task_completion).toBeGreaterThan(0);
    expect(durable.timeline.segments.backend_create).toBeGreaterThan(0);
  });

  it('measures the floor: its workflow reaches its activity and ends, on its own task queue', () => {
    for (const c of result.workloads.flatMap((w) => w.cells).filter((x) => x.path === 'floor')) {
      for (const v of [c.ttft.p50, c.end.p50, c.turnsPerSec, c.timeline.total, c.timeline.segments.prepare_turn]) {
        expect(v).toBeTypeOf('number');
        expect(v).toBeGreaterThan(0);
      }
      expect(c.end.p50!).toBeGreaterThanOrEqual(c.ttft.p50!);
      expect(c.timeline.activities?.floorRun).toBeDefined();
      // No api, no backend: nothing of the product's is written for a floor turn.
      expect(c.db.rowsPerTurn['public.messages'] ?? 0).toBe(0);
    }
    expect(result.floor?.started).toBeGreaterThan(0);
  });

  it('measures the peer: LangGraph.js streams the same answer, checkpoints it in PostgreSQL, and its CPU is counted apart', async () => {
    for (const w of result.workloads) {
      const c = w.cells.find((x) => x.path === 'peer')!;
      expect(c.ttft.p50).toBeGreaterThan(0);
      expect(c.end.p50!).toBeGreaterThanOrEqual(c.ttft.p50!);
      expect(c.cpuMsPerTurn?.peer).toBeGreaterThan(0);
      // Nothing of the product's is written for a peer turn.
      expect(c.db.rowsPerTurn['agent_backend.events'] ?? 0).toBe(0);
      // One SSE frame per answer piece plus the end: 200 tokens for plain.
      if (w.name === 'plain') expect(c.framesPerTurn).toBe(201);
    }
    // durability 'sync': every turn's supersteps are checkpoints (input, model, and for tool: tools and model again).
    const rows = await stack.db.$queryRawUnsafe<{ n: bigint }[]>('select count(*)::bigint as n from bench_peer.checkpoints');
    expect(Number(rows[0]!.n)).toBeGreaterThan(0);
  });

  it('renders the side-by-side table with a ratio column', () => {
    const md = renderMarkdown(result);
    expect(md).toContain('| metric | conc. | durable | direct | floor | peer | durable/direct |');
    expect(md).toMatch(/\| first token p50 \(ms\) \| 1 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+× \|/);
    expect(md).toContain('| path | first token p50, plain, c=1 (ms) |');
  });
});
