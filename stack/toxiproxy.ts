/**
 * Toxiproxy (`github.com/Shopify/toxiproxy/v2`), the user-space TCP proxy that injects latency between the multi-host
 * run's namespaces (issue 44 item 2): this kernel has no `tc netem` (shared/design/ENVIRONMENT.md "Containers and
 * hosts"). SHOPIFY_TOXIPROXY_PATH → the project cache (.cache/toxiproxy/v<version>/bin/toxiproxy-server) → `go install`
 * from the Go module proxy into that cache (measured: 774 s on this 2-core machine under a load average of ~25, most
 * of it waiting for the cores) → a clear error.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { goBinary } from './temporal-server.js';

export const TOXIPROXY_VERSION = '2.5.0';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CACHE_BIN = path.join(ROOT, '.cache', 'toxiproxy', `v${TOXIPROXY_VERSION}`, 'bin');

function works(bin: string): boolean {
  try {
    return spawnSync(bin, ['-version'], { encoding: 'utf8', timeout: 10_000 }).status === 0;
  } catch {
    return false;
  }
}

export function locateToxiproxy(opts: { log?: (m: string) => void } = {}): string {
  const explicit = process.env.SHOPIFY_TOXIPROXY_PATH;
  if (explicit) {
    if (!works(explicit)) throw new Error(`SHOPIFY_TOXIPROXY_PATH=${explicit} is not a working toxiproxy-server`);
    return explicit;
  }
  const bin = path.join(CACHE_BIN, 'toxiproxy-server');
  if (works(bin)) return bin;
  const go = goBinary(process.env.GO_BIN);
  if (!go) throw new Error('Cannot build Toxiproxy: Go was not found (apt-get install golang-go, GO_BIN, or SHOPIFY_TOXIPROXY_PATH).');
  opts.log?.(`building Toxiproxy ${TOXIPROXY_VERSION} from the Go module proxy into ${CACHE_BIN} ...`);
  fs.mkdirSync(CACHE_BIN, { recursive: true });
  const r = spawnSync(go, ['install', `github.com/Shopify/toxiproxy/v2/cmd/server@v${TOXIPROXY_VERSION}`], {
    env: { ...process.env, GOBIN: CACHE_BIN },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`go install toxiproxy failed (exit ${r.status ?? r.signal})`);
  fs.renameSync(path.join(CACHE_BIN, 'server'), bin);
  return bin;
}

/** A running toxiproxy-server and its HTTP API. */
export class Toxiproxy {
  private constructor(
    readonly child: ChildProcess,
    readonly api: string,
  ) {}

  /** Starts the server with its API on `host:port` (`wrap` prefixes the command, e.g. `ip netns exec <ns>`). */
  static async start(opts: { host: string; port: number; logFile: string; wrap?: (argv: string[]) => string[] }): Promise<Toxiproxy> {
    const argv = [locateToxiproxy(), '-host', opts.host, '-port', String(opts.port)];
    const [cmd, ...args] = opts.wrap ? opts.wrap(argv) : argv;
    const fd = fs.openSync(opts.logFile, 'a');
    const child = spawn(cmd!, args, { stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    const t = new Toxiproxy(child, `http://${opts.host}:${opts.port}`);
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        if ((await fetch(`${t.api}/version`)).ok) return t;
      } catch {
        /* not up yet */
      }
      if (child.exitCode !== null) throw new Error(`toxiproxy exited at start; see ${opts.logFile}`);
      if (Date.now() > deadline) throw new Error(`toxiproxy did not answer on ${t.api}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A proxy `listen` → `upstream` with `latencyMs` added each way (0: none). */
  async proxy(name: string, listen: string, upstream: string, latencyMs: number): Promise<void> {
    const res = await fetch(`${this.api}/proxies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name, listen, upstream, enabled: true }),
    });
    if (!res.ok) throw new Error(`toxiproxy: proxy ${name} refused: ${res.status} ${await res.text()}`);
    if (latencyMs > 0) await this.latency(name, latencyMs);
  }

  /** Sets the latency of a proxy, both directions (each toxic delays the data flowing its way). */
  async latency(name: string, ms: number): Promise<void> {
    for (const stream of ['upstream', 'downstream'] as const) {
      const toxic = `latency_${stream}`;
      await fetch(`${this.api}/proxies/${name}/toxics/${toxic}`, { method: 'DELETE' });
      if (ms <= 0) continue;
      const res = await fetch(`${this.api}/proxies/${name}/toxics`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: toxic, type: 'latency', stream, toxicity: 1, attributes: { latency: ms, jitter: 0 } }),
      });
      if (!res.ok) throw new Error(`toxiproxy: latency on ${name} refused: ${res.status} ${await res.text()}`);
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    await gone;
  }
}
