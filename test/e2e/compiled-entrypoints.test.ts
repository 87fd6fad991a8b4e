/**
 * The production entry points as the image runs them (issue 15): `scripts/build.ts` compiles them, then the
 * compiled migrate, admin CLI, agent backend, api and worker run with plain `node` (no tsx) and
 * NODE_ENV=production against this run's PostgreSQL and Temporal — they serve their health endpoints and a
 * turn streams through them. The build goes to a directory of its own (type checking is `npm run typecheck`'s
 * job; `--no-check` emits the same JavaScript faster), and the processes run from a copy of the image's runtime
 * layout: exactly the paths the Dockerfile's runtime stage copies from the build stage (node_modules linked, not
 * copied), so a file the runtime reads but the image lacks fails here.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../stack/ports.js';
import { pgUrl } from '../support/db.js';
import { chat } from '../support/sse.js';
import { PREBUILT_BUNDLES } from '../../worker/telemetry.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DIR = path.join(inject('testDataDir'), 'compiled');
const OUT = path.join(DIR, 'build');
/** The runtime stage's /app (inside the project tree only so that nothing above it has a package.json). */
const APP = path.join(DIR, 'app');
const children: ChildProcess[] = [];

/** Production secrets of this test (one of them through a secret file, as compose's secrets deliver them). */
function productionEnv(databaseUrl: string): NodeJS.ProcessEnv {
  const innerKeyFile = path.join(DIR, 'inner-api-key');
  fs.writeFileSync(innerKeyFile, 'compiled-test-inner-key-0123456789\n', { mode: 0o600 });
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATA_DIR: path.join(DIR, 'data'),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: `tq-compiled-${process.pid}`,
    INNER_API_KEY_FILE: innerKeyFile,
    AGENT_BACKEND_TOKEN: 'compiled-test-backend-token-0123456789',
    EXECUTION_CONTEXT_SIGNING_KEY: 'compiled-test-signing-key-0123456789',
    ENCRYPTION_KEY: 'ab'.repeat(32),
    DEMO_MODEL_TOKEN_DELAY_MS: '1',
  };
}

function runNode(script: string, args: string[], env: NodeJS.ProcessEnv) {
  return spawnSync(process.execPath, [path.join(APP, 'dist', script), ...args], { env, cwd: APP, encoding: 'utf8', timeout: 60_000 });
}

function startNode(name: string, script: string, env: NodeJS.ProcessEnv): ChildProcess {
  const log = fs.openSync(path.join(DIR, `${name}.log`), 'a');
  const child = spawn(process.execPath, [path.join(APP, 'dist', script)], { env, cwd: APP, stdio: ['ignore', log, log] });
  children.push(child);
  return child;
}

/** Polls `url` until it answers 200 (or the process died, or 30 s passed); the body of the 200. */
async function healthy(url: string, child: ChildProcess, name: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`${name} exited with ${child.exitCode}: ${fs.readFileSync(path.join(DIR, `${name}.log`), 'utf8')}`);
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) }).catch(() => null);
    if (r?.ok) return (await r.json()) as Record<string, unknown>;
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error(`${name} did not answer 200 at ${url}: ${fs.readFileSync(path.join(DIR, `${name}.log`), 'utf8').slice(-2000)}`);
}

/** An empty database: the compiled migrate creates the schema. */
async function emptyDatabase(): Promise<string> {
  const name = `t_compiled_${process.pid}`;
  const admin = new pg.Client({ connectionString: pgUrl('postgres') });
  await admin.connect();
  try {
    await admin.query(`drop database if exists "${name}" with (force)`);
    await admin.query(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  return pgUrl(name);
}

/**
 * Replays the runtime stage's `COPY --from=build /app/<src>... ./<dest>` lines: /app/dist is this test's build,
 * everything else comes from the work tree (where `npm run build`'s other inputs are).
 */
function assembleRuntime(): string[] {
  const copies = [...fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').matchAll(/^COPY --from=build (?:--chown=\S+ )?(.+)$/gm)];
  const copied: string[] = [];
  for (const [, args] of copies) {
    const parts = args!.trim().split(/\s+/);
    const dest = parts.pop()!;
    for (const src of parts) {
      const rel = path.relative('/app', src);
      const from = rel === 'dist' ? OUT : path.join(ROOT, rel);
      const to = dest.endsWith('/') ? path.join(APP, dest, path.basename(rel)) : path.join(APP, dest);
      if (!fs.existsSync(from)) continue; // .cache/sandbox exists only after a sandbox build
      fs.mkdirSync(path.dirname(to), { recursive: true });
      if (rel === 'node_modules') fs.symlinkSync(from, to, 'dir');
      else fs.cpSync(from, to, { recursive: true });
      copied.push(rel);
    }
  }
  return copied;
}

let env: NodeJS.ProcessEnv;
let copiedToRuntime: string[] = [];

beforeAll(async () => {
  fs.mkdirSync(DIR, { recursive: true });
  const build = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build.ts', '--no-check', '--out-dir', OUT], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 240_000,
  });
  if (build.status !== 0) throw new Error(`build failed: ${build.stdout}\n${build.stderr}`);
  fs.rmSync(APP, { recursive: true, force: true });
  copiedToRuntime = assembleRuntime();
  env = productionEnv(await emptyDatabase());
}, 270_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), 10_000).unref();
        }),
    ),
  );
});

describe('compiled production entry points', () => {
  it('emit JavaScript entry points and a prebuilt workflow bundle, laid out as the image runs them', () => {
    expect(copiedToRuntime).toEqual(expect.arrayContaining(['package.json', 'node_modules', 'dist', 'web', 'prisma/migrations']));
    for (const f of ['api/main.js', 'worker.js', 'agent-backend/main.js', 'cli/admin.js', 'scripts/migrate.js', 'workflow-bundle.js'])
      expect(fs.existsSync(path.join(OUT, f)), f).toBe(true);
    expect(fs.readFileSync(path.join(OUT, 'workflow-bundle.js'), 'utf8')).toContain('agentTurn');
    // One bundle per set of interceptor modules (worker/telemetry.ts): with metrics and tracing off, none.
    for (const b of Object.values(PREBUILT_BUNDLES)) {
      const code = fs.readFileSync(path.join(OUT, b.file), 'utf8');
      expect(code, b.file).toContain('agentTurn');
      expect([b.file, code.includes('OpenTelemetryInboundInterceptor'), code.includes('turnMetrics')]).toEqual([
        b.file,
        b.tracing,
        b.metrics,
      ]);
    }
  });

  it('import only declared production dependencies (the image prunes the dev dependencies)', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const imported = new Set<string>();
    const walk = (dir: string): string[] =>
      fs
        .readdirSync(dir, { withFileTypes: true })
        .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
    // The workflow bundle is self-contained (webpack); every other module imports packages by name.
    for (const file of walk(OUT).filter((f) => f.endsWith('.js') && !/workflow-bundle(-\w+)?\.js$/.test(f))) {
      const js = fs.readFileSync(file, 'utf8');
      const specs = [
        ...js.matchAll(/^(?:import|export)\s[^;]*?from\s+["']([^"'.][^"']*)["']/gm),
        ...js.matchAll(/^import\s+["']([^"'.][^"']*)["']/gm),
        ...js.matchAll(/\bimport\(\s*["']([^"'.][^"']*)["']\s*\)/g),
      ].map((m) => m[1]!);
      for (const s of specs)
        if (!s.startsWith('node:')) imported.add(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!);
    }
    expect(imported.size).toBeGreaterThan(5);
    expect([...imported].filter((p) => !(p in pkg.dependencies))).toEqual([]);
  });

  it('refuse to start in production with the development default secrets, naming each', () => {
    const r = runNode('api/main.js', [], {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      DATABASE_URL: env.DATABASE_URL,
      TEMPORAL_ADDRESS: '127.0.0.1:1',
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(
      /refuses the development default of INNER_API_KEY, AGENT_BACKEND_TOKEN, ENCRYPTION_KEY, EXECUTION_CONTEXT_SIGNING_KEY/,
    );
  });

  let apiKey: string;

  it('migrate the empty database and provision a tenant, app and key with the compiled admin CLI', () => {
    const m = runNode('scripts/migrate.js', [], env);
    expect(m.status, m.stderr).toBe(0);
    expect((JSON.parse(m.stdout) as { applied: string[] }).applied.length).toBeGreaterThan(0);
    const spec = path.join(DIR, 'provision.json');
    fs.writeFileSync(
      spec,
      JSON.stringify({
        tenant: 'Compiled Co',
        credit_limit: 1_000_000,
        accounts: [{ email: 'ops@compiled.test' }],
        apps: [{ name: 'Support' }],
      }),
    );
    const p = runNode('cli/admin.js', ['provision', '--file', spec, '--key-dir', path.join(DIR, 'keys')], env);
    expect(p.status, p.stderr).toBe(0);
    const out = JSON.parse(p.stdout) as { apps: { api_key: string }[] };
    apiKey = out.apps[0]!.api_key;
    expect(apiKey).toMatch(/^app-/);
  });

  it('agent backend, api and worker start from dist, serve their health endpoints and a turn', async () => {
    const [apiPort, backendPort, workerHealthPort] = await Promise.all([freePort(), freePort(), freePort()]);
    const all = {
      ...env,
      API_PORT: String(apiPort),
      API_INTERNAL_URL: `http://127.0.0.1:${apiPort}`,
      AGENT_BACKEND_PORT: String(backendPort),
      AGENT_BACKEND_URL: `http://127.0.0.1:${backendPort}`,
      WORKER_HEALTH_PORT: String(workerHealthPort),
    };
    const backend = startNode('agent-backend', 'agent-backend/main.js', all);
    const api = startNode('api', 'api/main.js', all);
    const worker = startNode('worker', 'worker.js', all);
    await healthy(`http://127.0.0.1:${backendPort}/healthz`, backend, 'agent-backend');
    await healthy(`http://127.0.0.1:${apiPort}/healthz`, api, 'api');
    expect(await healthy(`http://127.0.0.1:${workerHealthPort}/healthz`, worker, 'worker')).toMatchObject({
      checks: { temporal: true, database: true },
    });
    const ready = await healthy(`http://127.0.0.1:${apiPort}/readyz`, api, 'api');
    expect(ready).toMatchObject({ checks: { database: true, temporal: true, agent_backend: true } });
    // Files found from the project root, not next to the compiled module: the chat page and the package version.
    expect((await fetch(`http://127.0.0.1:${apiPort}/`)).status).toBe(200);
    const spec = (await (await fetch(`http://127.0.0.1:${apiPort}/openapi.json`)).json()) as { info: { version: string } };
    expect(spec.info.version).toBe(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);

    const { status, frames } = await chat(`http://127.0.0.1:${apiPort}`, apiKey, {
      query: 'Hello from the compiled build, I am Ada.',
      user: 'ada',
    });
    expect(status).toBe(200);
    expect(frames.at(-1)?.event).toBe('message_end');
    expect(String(frames.find((f) => f.event === 'message')?.data.answer)).toContain('Ada');
  }, 90_000);
});
