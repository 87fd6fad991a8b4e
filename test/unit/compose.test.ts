/**
 * docker-compose.yml and the Dockerfile as far as a machine without a Docker daemon can check them (issue 15):
 * the compose file is loaded by compose-go — the parser Docker Compose itself uses: the Compose Specification
 * schema, interpolation, merge keys, and every depends_on / secret / config / volume reference
 * (deploy/compose-check) — and the resolved project must keep the deployment's rules: start gated on health and on
 * the setup jobs, restart policies, no fixed host port on the api, compiled JS, secrets only as files, the shared
 * data volume. Needs Go (CI installs it for shellctl already).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, SECRET_VARS } from '../../core/platform/config.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Service {
  image?: string;
  command?: string[];
  entrypoint?: string[];
  restart?: string;
  profiles?: string[];
  ports?: { published?: string; host_ip?: string }[];
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string | null>;
  secrets?: { source: string }[];
  volumes?: { type: string; source: string; target: string }[];
  healthcheck?: { test?: string[]; disable?: boolean };
}
interface Project {
  services: Record<string, Service>;
  secrets: Record<string, { file?: string; environment?: string }>;
  volumes: Record<string, unknown>;
}

function goBinary(): string {
  for (const c of [process.env.GO_BIN, 'go', '/usr/local/go/bin/go'].filter((x): x is string => Boolean(x))) {
    try {
      execFileSync(c, ['version'], { stdio: 'ignore' });
      return c;
    } catch {
      // next
    }
  }
  throw new Error('Go is needed to validate docker-compose.yml (deploy/compose-check): install Go or set GO_BIN');
}

/** The project compose-go resolves from `files` (merged in order, as `docker compose -f … -f …`). */
function load(files: string[], env: Record<string, string> = {}): Project {
  const out = execFileSync(goBinary(), ['run', '.', ...files.map((f) => path.join(ROOT, f))], {
    cwd: path.join(ROOT, 'deploy', 'compose-check'),
    encoding: 'utf8',
    timeout: 240_000,
    maxBuffer: 16 * 1024 * 1024,
    env: { ...process.env, ...env },
  });
  return JSON.parse(out) as Project;
}

let project: Project;
beforeAll(() => {
  project = load(['docker-compose.yml']);
}, 300_000);

const APP = ['api', 'worker', 'agent-backend'] as const;
const JOBS = ['migrate', 'provision', 'temporal-schema', 'temporal-setup'] as const;

describe('docker-compose.yml (validated by compose-go)', () => {
  it('runs the app roles from the compiled build, never tsx', () => {
    for (const name of [...APP, 'migrate', 'provision']) {
      const cmd = project.services[name]!.command!;
      expect(cmd[0], name).toBe('node');
      expect(cmd[1], name).toMatch(/^dist\/.+\.js$/);
      // The script is one of the build's entry points (tsconfig.build.json).
      const source = cmd[1]!.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      expect(JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8')).include, name).toContain(source);
    }
  });

  it('gates every start on health or on a finished job', () => {
    for (const [name, svc] of Object.entries(project.services))
      for (const [dep, { condition }] of Object.entries(svc.depends_on ?? {}))
        if (!(name === 'temporal-setup' && dep === 'temporal'))
          // temporal-setup itself waits for `temporal operator cluster health` (the server image has no CLI).
          expect(['service_healthy', 'service_completed_successfully'], `${name} → ${dep}`).toContain(condition);
    for (const name of ['api', 'worker'])
      expect(project.services[name]!.depends_on).toMatchObject({
        migrate: { condition: 'service_completed_successfully' },
        'temporal-setup': { condition: 'service_completed_successfully' },
        'agent-backend': { condition: 'service_healthy' },
      });
    for (const name of [...APP, 'postgres']) expect(project.services[name]!.healthcheck?.test, name).toBeDefined();
    expect(project.services.temporal!.command ?? []).not.toContain('autosetup');
  });

  it('uses the current Temporal images: server + admin-tools schema setup, no auto-setup', () => {
    const images = Object.values(project.services).map((s) => s.image ?? '');
    expect(images.filter((i) => i.includes('auto-setup'))).toEqual([]);
    expect(project.services.temporal!.image).toMatch(/^temporalio\/server:/);
    expect(project.services['temporal-schema']!.image).toMatch(/^temporalio\/admin-tools:/);
    expect(project.services['temporal-schema']!.command!.join('\n')).toMatch(/temporal-sql-tool .*update-schema/);
  });

  it('restarts services, not one-shot jobs', () => {
    for (const [name, svc] of Object.entries(project.services)) {
      if ((JOBS as readonly string[]).includes(name)) expect(svc.restart, name).toBe('no');
      else expect(['unless-stopped', 'always'], name).toContain(svc.restart);
    }
  });

  it('publishes no fixed host port for the api (scalable); the proxy is the entry point; ops ports on loopback only', () => {
    expect(project.services.api!.ports ?? []).toEqual([]);
    expect(project.services.proxy!.depends_on).toMatchObject({ api: { condition: 'service_healthy' } });
    for (const name of ['temporal', 'temporal-ui'])
      for (const p of project.services[name]!.ports ?? []) expect(p.host_ip, name).toBe('127.0.0.1');
  });

  it('gives the internal api address to the agent backend only (on the api it would become the base of client file links)', () => {
    expect(project.services['agent-backend']!.environment!.API_INTERNAL_URL).toBe('http://api:5001');
    expect(project.services.api!.environment!.API_INTERNAL_URL).toBeUndefined();
  });

  it('takes every secret from a file, none from a value in the compose file', () => {
    for (const name of [...APP, 'migrate', 'provision']) {
      const env = project.services[name]!.environment ?? {};
      expect(env.NODE_ENV, name).toBe('production'); // production refuses the dev defaults (core/platform/config.ts)
      const mounted = (project.services[name]!.secrets ?? []).map((s) => s.source);
      for (const v of [...SECRET_VARS, 'DATABASE_URL', 'SHELLCTL_AUTH_TOKEN']) {
        expect(env[v], `${name}: ${v} inline`).toBeUndefined();
        const secret = /^\/run\/secrets\/(.+)$/.exec(env[`${v}_FILE`] ?? '')?.[1];
        expect(secret && mounted.includes(secret), `${name}: ${v}_FILE names a mounted secret`).toBe(true);
      }
    }
    for (const [name, s] of Object.entries(project.secrets)) expect(s.file, name).toBe(path.join(ROOT, 'secrets', name));
    expect(fs.readFileSync(path.join(ROOT, '.gitignore'), 'utf8').split('\n')).toContain('secrets/');
  });

  it('shares one data volume (uploads, workspaces) between every api replica, worker and agent backend', () => {
    for (const name of APP) {
      const svc = project.services[name]!;
      expect(svc.volumes, name).toContainEqual(expect.objectContaining({ type: 'volume', source: 'appdata', target: '/data' }));
      expect(svc.environment).toMatchObject({ DATA_DIR: '/data', WORKSPACES_DIR: '/data/workspaces' });
    }
  });
});

describe('docker-compose.s3.yml over docker-compose.yml (WORKSPACE_STORE=s3)', () => {
  const S3 = { S3_BUCKET: 'agents-workspaces', S3_ENDPOINT: 'https://s3.example.com', S3_FORCE_PATH_STYLE: 'true' };
  let s3: Project;
  beforeAll(() => {
    s3 = load(['docker-compose.yml', 'docker-compose.s3.yml'], S3);
  }, 300_000);

  it('runs every app role on the bucket, its keys as secret files, and the app’s config accepts the environment', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'compose-s3-'));
    try {
      for (const name of APP) {
        const svc = s3.services[name]!;
        const mounted = (svc.secrets ?? []).map((x) => x.source);
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(svc.environment ?? {})) {
          const secret = /^\/run\/secrets\/(.+)$/.exec(v ?? '')?.[1];
          if (!secret) {
            env[k] = v ?? '';
            continue;
          }
          expect(mounted, `${name}: ${k} names a mounted secret`).toContain(secret);
          // The secret file as Docker mounts it, with a value of this test's (the S3 keys' own, the rest distinct).
          const file = path.join(dir, secret);
          fs.writeFileSync(file, secret === 'database_url' ? 'postgresql://u@db/d\n' : `${secret}-${'x'.repeat(40)}\n`);
          env[k] = file;
        }
        expect(env.S3_ACCESS_KEY_ID, `${name}: no key inline`).toBeUndefined();
        const config = loadConfig(env);
        expect(config, name).toMatchObject({
          WORKSPACE_STORE: 's3',
          S3_BUCKET: 'agents-workspaces',
          S3_ENDPOINT: 'https://s3.example.com',
          S3_FORCE_PATH_STYLE: true,
          S3_PREFIX: 'workspaces/',
          S3_ACCESS_KEY_ID: `s3_access_key_id-${'x'.repeat(40)}`,
          S3_SECRET_ACCESS_KEY: `s3_secret_access_key-${'x'.repeat(40)}`,
        });
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    for (const name of ['s3_access_key_id', 's3_secret_access_key']) expect(s3.secrets[name]!.file).toBe(path.join(ROOT, 'secrets', name));
  });

  it('gives the agent backend a /data of its own (no named volume: one per container), the api and worker still the shared one for uploads', () => {
    const backend = s3.services['agent-backend']!.volumes!;
    expect(backend.filter((v) => v.target === '/data')).toEqual([expect.objectContaining({ type: 'volume', target: '/data' })]);
    expect(backend.filter((v) => v.source)).toEqual([]);
    for (const name of ['api', 'worker'])
      expect(s3.services[name]!.volumes, name).toContainEqual(
        expect.objectContaining({ type: 'volume', source: 'appdata', target: '/data' }),
      );
    // The base file alone stays posix: the one-volume shape above.
    expect(project.services['agent-backend']!.environment!.WORKSPACE_STORE).toBeUndefined();
  });

  it('refuses to start without a bucket', () => {
    expect(() =>
      execFileSync(goBinary(), ['run', '.', path.join(ROOT, 'docker-compose.yml'), path.join(ROOT, 'docker-compose.s3.yml')], {
        cwd: path.join(ROOT, 'deploy', 'compose-check'),
        encoding: 'utf8',
        stdio: 'pipe',
        env: { ...process.env, S3_BUCKET: '' },
      }),
    ).toThrow(/set S3_BUCKET/);
  });
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const runtime = stages.at(-1)!;

  it('builds with dev dependencies and runs compiled JS with production dependencies as a non-root user', () => {
    const build = stages.find((s) => /AS build\b/.test(s))!;
    expect(build).toMatch(/RUN npm ci /);
    expect(build.indexOf('NODE_ENV=production')).toBe(-1); // the audit's bug: dev dependencies skipped
    expect(build).toMatch(/RUN npm run build/);
    expect(build).toMatch(/npm prune --omit=dev/);
    expect(runtime).toMatch(/AS runtime/);
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK /m);
    expect(runtime).toMatch(/^CMD \["node", "dist\/api\/main\.js"\]$/m);
    expect(runtime).not.toMatch(/tsx/);
    expect(runtime).toMatch(/chown -R node:node \/data/);
  });

  it('keeps local state out of the build context', () => {
    const ignored = fs.readFileSync(path.join(ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['.git', 'node_modules', 'dist', '.data', '.cache', 'secrets', '.env']) expect(ignored, p).toContain(p);
  });
});
