/**
 * bench/distance.ts's arithmetic and report (the run itself needs the cluster's Temporal server and Toxiproxy, built
 * from the Go module proxy: it is a command, `npm run bench:distance`, not a test; its figures are in docs/cluster.md).
 */
import { describe, expect, it } from 'vitest';
import { distanceCell, distanceSlope, LINKS, renderDistanceMarkdown, slope, type DistanceResult } from '../../bench/distance.js';

const sample = (ttftMs: number | null, endMs: number | null, ok = true) => ({ ttftMs, endMs, ok });

describe('bench:distance', () => {
  it('the slope is the least-squares one (ms of turn per ms added), 0 without two distinct latencies', () => {
    expect(
      slope([
        { x: 0, y: 200 },
        { x: 1, y: 500 },
        { x: 5, y: 1700 },
      ]),
    ).toBeCloseTo(300, 5);
    expect(
      slope([
        { x: 0, y: 10 },
        { x: 2, y: 14 },
      ]),
    ).toBe(2);
    expect(
      slope([
        { x: 3, y: 10 },
        { x: 3, y: 20 },
      ]),
    ).toBe(0);
    expect(slope([{ x: 1, y: 1 }])).toBe(0);
  });

  it('a cell counts failed or incomplete turns as errors and takes the percentiles of the rest', () => {
    const c = distanceCell(1, LINKS, [sample(100, 150), sample(300, 350), sample(200, 250), sample(null, null, false), sample(120, null)]);
    expect(c).toMatchObject({ latencyMs: 1, turns: 3, errors: 2, ttftP50: 200, endP50: 250 });
    expect(c.ttftP95).toBeGreaterThanOrEqual(c.ttftP50);
  });

  it('the report compares every cell with the 0 ms one and attributes the per-link cells in one-way trips', () => {
    const cells = [distanceCell(0, LINKS, [sample(200, 250)]), distanceCell(5, LINKS, [sample(1700, 1900)])];
    const result: DistanceResult = {
      machine: { cpu: 'test cpu', cores: 2, ramGiB: 4, node: 'v24', os: 'test' },
      loadAvg: [1, 2, 3],
      code: 'abc1234',
      at: '2026-12-02 14:00',
      links: LINKS,
      cells,
      perLink: [distanceCell(5, ['temporal-db'], [sample(700, 800)]), distanceCell(5, ['api'], [sample(260, 300)])],
      slope: distanceSlope(cells),
    };
    expect(result.slope).toEqual({ ttft: 300, end: 330 });
    const md = renderDistanceMarkdown(result);
    expect(md).toContain('| 5 ms | 1 | 0 | 1700 ms | 1700 ms | 1900 ms | 1900 ms | +1650 ms |');
    expect(md).toContain('**300 ms of first token and 330 ms of message_end per millisecond**');
    expect(md).toContain('| temporal-db | 700 ms | +500 ms | 800 ms | +550 ms | 110 |');
    expect(md).toContain('| api | 260 ms | +60 ms | 300 ms | +50 ms | 10 |');
  });
});
