/**
 * Issue 20: ops/grafana/dashboard.json is a dashboard Grafana can load (the fields it needs, checked with a zod
 * schema: Grafana publishes no JSON schema package) whose every query names metrics that the live processes
 * export — scraped from a real stack after a turn, so a renamed metric breaks this test, not the dashboard.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { metricNames, scrape } from './prom.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DASHBOARD = path.join(ROOT, 'ops', 'grafana', 'dashboard.json');

const Datasource = z.object({ type: z.literal('prometheus'), uid: z.string().min(1) });
const GridPos = z.object({
  x: z.number().int().min(0).max(23),
  y: z.number().int().min(0),
  w: z.number().int().min(1).max(24),
  h: z.number().int().min(1),
});
const Target = z.object({
  refId: z.string().regex(/^[A-Z]$/),
  expr: z.string().min(1),
  datasource: Datasource,
  legendFormat: z.string().optional(),
});
const Panel = z.discriminatedUnion('type', [
  z.object({
    id: z.number().int().positive(),
    type: z.literal('row'),
    title: z.string().min(1),
    gridPos: GridPos,
    collapsed: z.boolean(),
    panels: z.array(z.unknown()),
  }),
  z.object({
    id: z.number().int().positive(),
    type: z.enum(['timeseries', 'stat', 'gauge', 'bargauge', 'table']),
    title: z.string().min(1),
    description: z.string().optional(),
    datasource: Datasource,
    gridPos: GridPos,
    fieldConfig: z.object({ defaults: z.object({ unit: z.string() }).passthrough(), overrides: z.array(z.unknown()) }),
    options: z.record(z.string(), z.unknown()),
    targets: z.array(Target).min(1),
  }),
]);
const Dashboard = z.object({
  uid: z.string().regex(/^[a-zA-Z0-9_-]{1,40}$/),
  title: z.string().min(1),
  schemaVersion: z.number().int().min(36),
  version: z.number().int(),
  time: z.object({ from: z.string(), to: z.string() }),
  templating: z.object({ list: z.array(z.unknown()) }),
  panels: z.array(Panel).min(1),
});

const FUNCTIONS = new Set(
  'sum avg min max count rate irate increase delta deriv histogram_quantile clamp_min clamp_max abs topk bottomk by without on ignoring group_left group_right bool and or unless offset vector scalar time label_replace sort sort_desc'.split(
    ' ',
  ),
);

/** The metric names a PromQL expression reads: identifiers outside label matchers, ranges, grouping clauses and strings. */
function metricsOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '');
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((t) => !FUNCTIONS.has(t));
}

let stack: Stack;
beforeAll(async () => {
  stack = await startTestStack('obs_dashboard');
});
afterAll(async () => stack?.stop());

describe('the Grafana dashboard', () => {
  const dashboard = Dashboard.parse(JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')));
  const panels = dashboard.panels.filter((p) => p.type !== 'row');

  it('is a dashboard Grafana can load: unique panel ids, refIds unique per panel, panels that do not overlap', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) expect(new Set(p.targets.map((t) => t.refId)).size).toBe(p.targets.length);
    const cells = new Set<string>();
    for (const p of dashboard.panels)
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++)
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
    expect(metricsOf('histogram_quantile(0.95, sum by (le, kind) (rate(agent_event_commit_seconds_bucket{kind="x"}[5m])))')).toEqual([
      'agent_event_commit_seconds_bucket',
    ]);
  });

  it('names only metrics that the api, the worker and the agent backend export', async () => {
    const turn = await chat(stack.apiUrl, stack.demo!.apiKey, { query: 'Hello dashboard', user: 'ops' });
    expect(turn.frames.at(-1)!.event).toBe('message_end');
    const used = panels.flatMap((p) => p.targets.flatMap((t) => metricsOf(t.expr).map((m) => ({ panel: p.title, metric: m }))));
    expect(used.length).toBeGreaterThan(10);
    // The SDK's own histograms appear once its exporter has recorded the turn's tasks: scrape until they do.
    const missing = async () => {
      const texts = await Promise.all([stack.apiUrl, stack.workerHttpUrl!, stack.agentBackendUrl].map(scrape));
      const live = new Set(texts.flatMap((t) => [...metricNames(t)]));
      return used.filter((u) => !live.has(u.metric));
    };
    await expect.poll(missing, { timeout: 15_000, interval: 500 }).toEqual([]);
  });
});
