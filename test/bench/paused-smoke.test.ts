/**
 * `npm run bench:paused` (bench/paused.ts, issue 44 item 5), smoke-tested on a real stack with the worker as a child
 * process (as the scenario runs it): five conversations put into an ask_human pause, two of them resumed. The report
 * must have its shape — memory of the api and the worker, the worker's workflow cache, rows and database size per
 * paused turn, Temporal's open workflows — and every sampled resume must have reached its message_end with the
 * continuation succeeded. No timing is asserted: the figures are the benchmark's business.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderPausedMarkdown, runPausedBench, type PausedResult } from '../../bench/paused.js';
import { freePort } from '../../stack/ports.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let result: PausedResult;

beforeAll(async () => {
  const port = await freePort();
  stack = await startTestStack('bench_paused', { worker: 'child', env: { WORKER_HEALTH_PORT: port, METRICS_ENABLED: true } });
  result = await runPausedBench(
    {
      stack,
      log: () => undefined,
      workerPid: () => stack.workerChild?.pid,
      workerHttpUrl: `http://127.0.0.1:${port}`,
      temporal: 'dev',
      dataDir: null,
    },
    { turns: 5, concurrency: 2, sample: 2, sampleEveryMs: 500, settleMs: 500 },
  );
}, 180_000);
afterAll(async () => stack?.stop());

describe('npm run bench:paused, five paused conversations and two resumes', () => {
  it('pauses every conversation and resumes every sampled one to its message_end', () => {
    expect({ paused: result.fill.paused, errors: result.fill.errors, samples: result.fill.errorSamples }).toEqual({
      paused: 5,
      errors: 0,
      samples: [],
    });
    expect(result.resumes).toHaveLength(2);
    for (const r of result.resumes) {
      expect(r).toMatchObject({ ok: true, status: 'succeeded' });
      for (const v of [r.submitMs, r.firstEventMs, r.endMs]) expect(v).toBeGreaterThan(0);
      expect(r.endMs!).toBeGreaterThanOrEqual(r.firstEventMs!);
    }
    expect(result.resume).toMatchObject({ ok: 2, failed: 0 });
    expect(result.resume.end.n).toBe(2);
  });

  it('reports the api and worker memory, the workflow cache, Temporal and PostgreSQL at each milestone', () => {
    const first = result.milestones[0]!;
    const last = result.milestones.at(-1)!;
    expect(first.paused).toBe(0);
    expect(last.paused).toBe(5);
    for (const m of [first, last]) {
      for (const v of [m.api.rssMB, m.api.heapUsedMB, m.worker.rssMB, m.worker.heapUsedMB]) expect(v).toBeGreaterThan(0);
      expect(Object.keys(m.databaseBytes).length).toBeGreaterThan(0);
    }
    // The five waiting workflows are open on the stack's task queue and in the child's sticky cache.
    expect(last.openWorkflows).toBe(5);
    expect(last.cachedWorkflows).toBeGreaterThanOrEqual(1);
    expect(result.options.worker).toBe('child');
    expect(result.samples.length).toBeGreaterThan(0);
  });

  it('divides the rows and bytes by the paused turns: one conversation, message and form each', () => {
    const rows = result.perPausedTurn.rows;
    expect(rows['public.conversations']).toBe(1);
    expect(rows['public.messages']).toBe(1);
    expect(rows['public.human_input_forms']).toBe(1);
    expect(result.perPausedTurn.rowsTotal).toBeGreaterThan(3);
    expect(result.perPausedTurn.databaseBytes).toBeTypeOf('number');
    expect(result.perPausedTurn.workerRssKB).toBeTypeOf('number');
    const md = renderPausedMarkdown(result);
    expect(md).toContain('### Paused turns: 5 conversations');
    expect(md).toContain('| public.human_input_forms | 1 |');
  });
});
