/**
 * The multi-host run's network (issue 44 item 2, the first part): hosts are network namespaces on a bridge this test
 * makes (stack/netns.ts), and the distance between them is Toxiproxy's latency toxic (stack/toxiproxy.ts; this kernel
 * has no `tc netem`). A request from one namespace to a server in another, through a proxy adding L ms each way, takes
 * 2·L ms more than without it (at least 90 % of it: the medians are noisy on a loaded machine); every namespace and the bridge are gone afterwards.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostNetwork, netnsAvailable, type Host } from '../../stack/netns.js';
import { Toxiproxy } from '../../stack/toxiproxy.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-latency-'));
const tag = crypto.randomBytes(3).toString('hex');
const net = new HostNetwork(tag, 100 + crypto.randomInt(100));
let client: Host;
let server: Host;
let proxyHost: Host;
let echo: ChildProcess;
let toxi: Toxiproxy;

/** One request's round trip, ms, from inside `from` (a node one-liner in that namespace). */
function roundTrips(from: Host, host: string, port: number, n: number): number[] {
  const script = `
    const net = require('node:net');
    const s = net.connect(${port}, '${host}', async () => {
      s.setNoDelay(true);
      const out = [];
      for (let i = 0; i < ${n}; i++) {
        const t = process.hrtime.bigint();
        await new Promise((r) => { s.once('data', r); s.write('ping'); });
        out.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      console.log(JSON.stringify(out)); s.end();
    });`;
  const r = spawnSync('ip', ['netns', 'exec', from.ns, process.execPath, '-e', script], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`client failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as number[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

beforeAll(async () => {
  const why = netnsAvailable();
  expect(why, why ?? '').toBeNull();
  client = net.add('client');
  server = net.add('server');
  proxyHost = net.add('proxy');
  echo = spawn(
    'ip',
    [
      'netns',
      'exec',
      server.ns,
      process.execPath,
      '-e',
      `require('node:net').createServer((s) => { s.setNoDelay(true); s.pipe(s); }).listen(7000, '${server.ip}', () => console.log('up'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve) => echo.stdout!.once('data', () => resolve()));
  toxi = await Toxiproxy.start({ host: proxyHost.ip, port: 8474, logFile: path.join(dir, 'toxiproxy.log'), wrap: net.wrap(proxyHost) });
  await toxi.proxy('echo', `${proxyHost.ip}:7001`, `${server.ip}:7000`, 0);
}, 60_000);

afterAll(async () => {
  await toxi?.stop();
  echo?.kill('SIGTERM');
  net.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
  // Nothing of this run is left: no namespace, no bridge.
  expect(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout).not.toContain(`h${tag}-`);
  expect(spawnSync('ip', ['link', 'show', `hb${tag}`]).status).not.toBe(0);
});

describe('hosts in namespaces, latency from Toxiproxy', () => {
  it('a round trip through the proxy costs 2·L more at L = 1 and 5 ms each way', async () => {
    const direct = median(roundTrips(client, server.ip, 7000, 30));
    const results: Record<number, number> = {};
    for (const ms of [0, 1, 5]) {
      await toxi.latency('echo', ms);
      results[ms] = median(roundTrips(client, proxyHost.ip, 7001, 30));
    }
    console.log(
      `round trip, median of 30: direct ${direct.toFixed(2)} ms; via proxy at 0/1/5 ms: ${[0, 1, 5].map((m) => results[m]!.toFixed(2)).join(' / ')} ms`,
    );
    expect(results[1]! - results[0]!).toBeGreaterThanOrEqual(2 * 1 * 0.9);
    expect(results[5]! - results[0]!).toBeGreaterThanOrEqual(2 * 5 * 0.9);
    expect(results[5]!).toBeLessThan(results[0]! + 2 * 5 + 20);
  }, 120_000);
});
