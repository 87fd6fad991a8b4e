/**
 * What distance between the services costs (issue 44 item 2's figure): the `npm run cluster` topology (stack/cluster.ts:
 * the real Temporal server as four processes on PostgreSQL, the compiled api ×2, worker ×2 and agent backend ×2 behind
 * their balancers) with every link between tiers through Toxiproxy (stack/toxiproxy.ts; this kernel has no tc netem):
 *
 *   api, worker, agent backend                   ──▶ PostgreSQL        (proxy "postgres")
 *   Temporal server (history, matching, …)       ──▶ PostgreSQL        (proxy "temporal-db": its persistence)
 *   api, worker                                  ──▶ Temporal frontend (proxy "temporal")
 *   api, worker                                  ──▶ agent backends    (proxy "backend", in front of their balancer)
 *   agent backend (inner LLM, tools, knowledge)  ──▶ apis              (proxy "api", in front of their balancer)
 *
 * The client reaches the api balancer directly (its own distance is the user's, not the deployment's), and Temporal's
 * services reach each other directly (one cluster). For each latency (ms added each way on every proxy) the same turns
 * run one at a time — the demo model's `/slow 0` answer, so the model adds nothing — after a warm-up, and the client
 * times the first answer token and `message_end` (bench/client.ts). The slope per added millisecond is the number of
 * one-way trips on a turn's critical path: what a deployment pays per millisecond between its services. With
 * `--per-link <ms>` each link is then given that latency alone, so the cost is attributed link by link.
 *
 *   npm run bench:distance -- [--latency 0,1,5] [--per-link 5] [--links temporal,api] [--turns 20] [--warmup 3] [--no-build] [--out bench/results/local]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPg } from '../core/platform/embedded-pg.js';
import { freeClusterPorts, startCluster } from '../stack/cluster.js';
import { stablePort } from '../stack/ports.js';
import { Toxiproxy } from '../stack/toxiproxy.js';
import { durableTurn } from './client.js';
import { codeUnderTest } from './code-under-test.js';
import { describeMachine } from './probes.js';
import { percentile } from './stats.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DISTANCE_QUERY = '/slow 0 How far away are the services?';
/** The links a turn crosses between tiers, each one Toxiproxy proxy. */
export const LINKS = ['postgres', 'temporal-db', 'temporal', 'backend', 'api'] as const;
export type Link = (typeof LINKS)[number];

export interface DistanceCell {
  latencyMs: number;
  /** The links the latency was added to (all of them, or one in the per-link cells). */
  links: readonly Link[];
  turns: number;
  errors: number;
  ttftP50: number;
  ttftP95: number;
  endP50: number;
  endP95: number;
}

export interface DistanceResult {
  machine: ReturnType<typeof describeMachine>;
  /** Load average (1, 5, 15 min) when the runs started: the machine is shared. */
  loadAvg: number[];
  code: string;
  at: string;
  links: readonly string[];
  cells: DistanceCell[];
  /** One link at a time at the --per-link latency (empty without it). */
  perLink: DistanceCell[];
  /** Least-squares slope of the p50s over the added latency: ms of turn per ms added each way on every link. */
  slope: { ttft: number; end: number };
}

/** Least-squares slope of y over x (0 for fewer than two distinct x). */
export function slope(points: { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  if (sxx === 0) return 0;
  return points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0) / sxx;
}

/** The cell of one latency from its samples (ms); errors counted apart. */
export function distanceCell(
  latencyMs: number,
  links: readonly Link[],
  samples: { ttftMs: number | null; endMs: number | null; ok: boolean }[],
): DistanceCell {
  const ok = samples.filter((s) => s.ok && s.ttftMs !== null && s.endMs !== null);
  const ttft = ok.map((s) => s.ttftMs!);
  const end = ok.map((s) => s.endMs!);
  const r = (v: number) => Math.round(v * 10) / 10;
  return {
    latencyMs,
    links,
    turns: ok.length,
    errors: samples.length - ok.length,
    ttftP50: r(percentile(ttft, 50) ?? NaN),
    ttftP95: r(percentile(ttft, 95) ?? NaN),
    endP50: r(percentile(end, 50) ?? NaN),
    endP95: r(percentile(end, 95) ?? NaN),
  };
}

export function distanceSlope(cells: DistanceCell[]): DistanceResult['slope'] {
  const r = (v: number) => Math.round(v * 10) / 10;
  return {
    ttft: r(slope(cells.map((c) => ({ x: c.latencyMs, y: c.ttftP50 })))),
    end: r(slope(cells.map((c) => ({ x: c.latencyMs, y: c.endP50 })))),
  };
}

export function renderDistanceMarkdown(result: DistanceResult): string {
  const m = result.machine;
  const base = result.cells.find((c) => c.latencyMs === 0);
  const lines = [
    `### What distance costs (${result.at}, ${result.code})`,
    '',
    `Machine: ${m.cores} × ${m.cpu}, load average at start ${result.loadAvg.map((l) => l.toFixed(1)).join(' / ')}. ` +
      `Links with latency added each way: ${result.links.join(', ')}. Turns one at a time, \`${DISTANCE_QUERY}\`.`,
    '',
    '| added each way | turns | errors | first token p50 | p95 | message_end p50 | p95 | message_end p50 vs 0 ms |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...result.cells.map(
      (c) =>
        `| ${c.latencyMs} ms | ${c.turns} | ${c.errors} | ${c.ttftP50} ms | ${c.ttftP95} ms | ${c.endP50} ms | ${c.endP95} ms | ${
          base && c !== base ? `+${Math.round((c.endP50 - base.endP50) * 10) / 10} ms` : '—'
        } |`,
    ),
    '',
    `Slope: **${result.slope.ttft} ms of first token and ${result.slope.end} ms of message_end per millisecond** between ` +
      `the services (each way): the one-way trips on a turn's critical path.`,
  ];
  if (result.perLink.length && base) {
    lines.push(
      '',
      `One link at a time (${result.perLink[0]!.latencyMs} ms each way on that link only):`,
      '',
      '| link | first token p50 | vs 0 ms | message_end p50 | vs 0 ms | one-way trips (message_end) |',
      '|---|---:|---:|---:|---:|---:|',
      ...result.perLink.map((c) => {
        const d = (a: number, b: number) => `+${Math.round((a - b) * 10) / 10} ms`;
        return `| ${c.links.join(', ')} | ${c.ttftP50} ms | ${d(c.ttftP50, base.ttftP50)} | ${c.endP50} ms | ${d(c.endP50, base.endP50)} | ${Math.round((c.endP50 - base.endP50) / c.latencyMs)} |`;
      }),
    );
  }
  return lines.join('\n');
}

function option(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const latencies = (option(argv, 'latency') ?? '0,1,5').split(',').map(Number);
  const turns = Number(option(argv, 'turns') ?? 20);
  const warmup = Number(option(argv, 'warmup') ?? 3);
  const outDir = path.resolve(ROOT, option(argv, 'out') ?? 'bench/results/local');
  if (latencies.some((l) => !Number.isFinite(l) || l < 0) || !(turns > 0)) throw new Error('bad --latency or --turns');
  if (!latencies.includes(0)) throw new Error('--latency must include 0 (the base every figure is compared with)');
  const log = (m: string) => console.log(`[distance] ${m}`);
  const machine = describeMachine();
  const dir = path.join(ROOT, '.data', `bench-distance-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const ports = await freeClusterPorts();
  const perLink = option(argv, 'per-link') === undefined ? null : Number(option(argv, 'per-link'));
  const listen: Record<Link, number> = {
    postgres: await stablePort(),
    'temporal-db': await stablePort(),
    temporal: await stablePort(),
    backend: await stablePort(),
    api: await stablePort(),
  };
  const toxi = await Toxiproxy.start({ host: '127.0.0.1', port: await stablePort(), logFile: path.join(dir, 'toxiproxy.log') });
  const pg = await startEmbeddedPg({ dir: path.join(dir, 'pg'), port: ports.postgres, durable: true });
  let cluster: Awaited<ReturnType<typeof startCluster>> | null = null;
  try {
    await pg.ensureDatabase('dify_agent');
    const upstream: Record<Link, string> = {
      postgres: `127.0.0.1:${ports.postgres}`,
      'temporal-db': `127.0.0.1:${ports.postgres}`,
      temporal: `127.0.0.1:${ports.temporal.grpc.frontend}`,
      backend: `127.0.0.1:${ports.backend}`,
      api: `127.0.0.1:${ports.api}`,
    };
    for (const link of LINKS) await toxi.proxy(link, `127.0.0.1:${listen[link]}`, upstream[link], 0);
    const proxied = (link: Link) => {
      const u = new URL(pg.url('dify_agent'));
      u.port = String(listen[link]);
      return u.toString();
    };
    log(`starting the cluster in ${dir} (every tier link through toxiproxy)`);
    cluster = await startCluster({
      dataDir: dir,
      ports,
      // The Temporal server (and the cluster's set-up) on its own link; the services on theirs (env below).
      databaseUrl: proxied('temporal-db'),
      buildDir: path.join(dir, 'build'),
      build: !argv.includes('--no-build'),
      ui: false,
      env: {
        DATABASE_URL: proxied('postgres'),
        TEMPORAL_ADDRESS: `127.0.0.1:${listen.temporal}`,
        AGENT_BACKEND_URL: `http://127.0.0.1:${listen.backend}`,
        API_INTERNAL_URL: `http://127.0.0.1:${listen.api}`,
        LOG_LEVEL: 'warn',
      },
      log,
    });
    const target = { apiUrl: cluster.apiUrl, apiKey: cluster.demo!.apiKey, user: 'bench-distance' };
    const loadAvg = os.loadavg().map((l) => Math.round(l * 10) / 10);
    const services = [...cluster.backends, ...cluster.apis, ...cluster.workers];
    const temporalServices = Object.values(cluster.temporal);
    const measure = async (latency: number, links: readonly Link[]) => {
      for (const link of LINKS) await toxi.latency(link, links.includes(link) ? latency : 0);
      // Every connection made again, so each one crosses the links as they are now: a toxic added to a proxy did not
      // reach the connections already open through it (gRPC and keep-alive HTTP stayed at 0 ms in a first run).
      for (const t of temporalServices) await t.stop();
      await Promise.all(temporalServices.map((t) => t.start()));
      for (const svc of services) await svc.stop();
      for (const svc of services) await svc.start();
      for (let i = 0; i < warmup; i++) await durableTurn(target, DISTANCE_QUERY);
      const samples = [];
      for (let i = 0; i < turns; i++) samples.push(await durableTurn(target, DISTANCE_QUERY));
      const cell = distanceCell(latency, links, samples);
      log(
        `+${latency} ms each way on ${links.join(', ')}: first token p50 ${cell.ttftP50} ms, message_end p50 ${cell.endP50} ms (${cell.errors} errors)`,
      );
      return cell;
    };
    const cells: DistanceCell[] = [];
    for (const latency of latencies) cells.push(await measure(latency, LINKS));
    const perLinkCells: DistanceCell[] = [];
    const only = option(argv, 'links')?.split(',') as Link[] | undefined;
    if (only?.some((l) => !LINKS.includes(l))) throw new Error(`--links: one of ${LINKS.join(', ')}`);
    if (perLink !== null) for (const link of only ?? LINKS) perLinkCells.push(await measure(perLink, [link]));
    const result: DistanceResult = {
      machine,
      loadAvg,
      code: codeUnderTest().commit ?? 'unknown',
      at: new Date().toISOString().slice(0, 16).replace('T', ' '),
      links: LINKS,
      cells,
      perLink: perLinkCells,
      slope: distanceSlope(cells),
    };
    fs.mkdirSync(outDir, { recursive: true });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    fs.writeFileSync(path.join(outDir, `distance-${stamp}.json`), `${JSON.stringify(result, null, 2)}\n`);
    const md = renderDistanceMarkdown(result);
    fs.writeFileSync(path.join(outDir, `distance-${stamp}.md`), `${md}\n`);
    console.log(`\n${md}\n`);
    if ([...cells, ...perLinkCells].some((c) => c.errors > 0)) process.exitCode = 1;
  } finally {
    await cluster?.stop().catch(() => undefined);
    await pg.stop().catch(() => undefined);
    await toxi.stop().catch(() => undefined);
    if (!argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
