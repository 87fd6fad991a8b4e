/**
 * The admin CLI (cli/admin.ts) as an operator or a compose init job runs it: a subprocess against a fresh
 * database. Every command is idempotent, keys are shown once (or kept in a key file), provider credentials are
 * stored encrypted and can be rotated, and `npm start`'s demo seeding is the same code (it finds what the CLI
 * made, and the CLI finds what it made).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { hashApiKey } from '../../core/domain/api-keys.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { loadCredentials } from '../../core/domain/llm/credentials.js';
import { DEMO_TENANT_NAME, ensureDemoData } from '../../core/domain/seed.js';
import { freshDatabase } from '../support/db.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DIR = path.join(inject('testDataDir'), 'admin-cli');
const ENCRYPTION_KEY = 'cd'.repeat(32);
// The CLI is compiled once, as production runs it (compose's `node dist/cli/admin.js`), instead of `--import tsx`
// per spawn: each of the ~36 spawns stays a real process, but no longer loads tsx and transpiles the sources
// (0.6-0.9 s -> 0.36 s for `help`). Packages stay external and resolve from the checkout's node_modules.
const CLI = path.join(DIR, 'admin.mjs');
let databaseUrl: string;
let db: Db;

beforeAll(async () => {
  fs.mkdirSync(DIR, { recursive: true });
  await build({
    entryPoints: [path.join(ROOT, 'cli', 'admin.ts')],
    outfile: CLI,
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    logLevel: 'warning',
  });
  databaseUrl = await freshDatabase('admin_cli');
  db = createDb(databaseUrl, { max: 2 });
});
afterAll(async () => db?.$disconnect());

/** Runs `admin <args>`; stdout parsed as the command's JSON when it succeeded. */
function admin(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl, ENCRYPTION_KEY, LOG_LEVEL: 'silent', ...env },
  });
  const json = r.status === 0 && r.stdout.trim().startsWith('{') ? (JSON.parse(r.stdout) as Record<string, unknown>) : null;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, json };
}

function writeJson(name: string, value: unknown): string {
  const file = path.join(DIR, name);
  fs.writeFileSync(file, JSON.stringify(value));
  return file;
}

describe('admin CLI', () => {
  it('explains itself and refuses unknown commands and options with exit 2', () => {
    expect(admin(['help']).stdout).toContain('provision');
    expect(admin(['frobnicate']).status).toBe(2);
    expect(admin(['tenant', '--nme', 'x']).status).toBe(2);
    expect(admin(['tenant']).stderr).toMatch(/--name is required/);
  });

  let tenantId: string;

  it('providers: which model providers this deployment hosts (docs/models.md)', () => {
    const r = admin(['providers'], { ANTHROPIC_API_KEY: 'sk-ant-test-0123456789' });
    expect(r.status).toBe(0);
    const by = Object.fromEntries(
      (r.json!.providers as { provider: string; system_hosted: boolean; models: string[] }[]).map((p) => [p.provider, p]),
    );
    expect(by.anthropic).toMatchObject({ system_hosted: true, models: expect.arrayContaining(['claude-3-5-haiku-20241022']) });
    expect(by.openai!.system_hosted).toBe(false);
    expect(r.stdout).not.toContain('sk-ant-test');
  });

  it('tenant and account: created once, found again', () => {
    const first = admin(['tenant', '--name', 'Acme']).json!;
    expect(first.created).toBe(true);
    tenantId = first.tenant_id as string;
    expect(admin(['tenant', '--name', 'Acme']).json).toEqual({ tenant_id: tenantId, created: false });
    const acc = admin(['account', '--tenant', 'Acme', '--email', 'ops@acme.test', '--name', 'Ops']).json!;
    expect(acc.created).toBe(true);
    expect(admin(['account', '--tenant', tenantId, '--email', 'ops@acme.test']).json).toEqual({
      account_id: acc.account_id,
      created: false,
    });
    // An email belongs to one tenant.
    admin(['tenant', '--name', 'Other']);
    const clash = admin(['account', '--tenant', 'Other', '--email', 'ops@acme.test']);
    expect(clash.status).toBe(1);
    expect(clash.stderr).toMatch(/belongs to another tenant/);
  });

  it('console keys: a key file is reused while valid; --if-none issues only the first', async () => {
    const keyFile = path.join(DIR, 'keys', 'ops.console-key');
    const a = admin(['console-key', '--tenant', 'Acme', '--email', 'ops@acme.test', '--key-file', keyFile]).json!;
    expect(a.created).toBe(true);
    expect(a.console_key).toMatch(/^console-/);
    expect(fs.readFileSync(keyFile, 'utf8').trim()).toBe(a.console_key);
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(admin(['console-key', '--tenant', 'Acme', '--email', 'ops@acme.test', '--key-file', keyFile]).json).toMatchObject({
      console_key: a.console_key,
      created: false,
    });
    expect(admin(['console-key', '--tenant', 'Acme', '--email', 'ops@acme.test', '--if-none']).json).toMatchObject({
      console_key: null,
      created: false,
    });
    // Only the hash is stored.
    const row = await db.consoleToken.findUniqueOrThrow({ where: { token_hash: hashApiKey(a.console_key as string) } });
    expect(row.account_id).toBe(admin(['account', '--tenant', 'Acme', '--email', 'ops@acme.test']).json!.account_id);
  });

  it('app: agent and first published config from a file; a second run keeps the published config', async () => {
    const config = {
      prompt: { system_prompt: 'You answer questions about Acme.' },
      model: { provider: 'demo', model: 'demo-chat' },
      tools: { core: ['calculator'], plugin: [] },
    };
    const file = writeJson('agent.json', config);
    const made = admin(['app', '--tenant', 'Acme', '--name', 'Support', '--config', file, '--created-by', 'ops@acme.test']).json!;
    expect(made.created).toBe(true);
    const version = await db.agentConfigVersion.findUniqueOrThrow({ where: { id: made.config_version_id as string } });
    expect(version.version).toBe(1);
    expect((version.config_snapshot as { prompt: { system_prompt: string } }).prompt.system_prompt).toBe(config.prompt.system_prompt);
    const agent = await db.agent.findUniqueOrThrow({ where: { id: made.agent_id as string } });
    expect(agent.active_config_snapshot_id).toBe(made.config_version_id);
    expect(await db.agentConfigDraft.count({ where: { agent_id: agent.id, draft_type: 'DRAFT' } })).toBe(1);

    const other = writeJson('agent2.json', { ...config, prompt: { system_prompt: 'Changed.' } });
    const again = admin(['app', '--tenant', 'Acme', '--name', 'Support', '--config', other]).json!;
    expect(again).toMatchObject({ app_id: made.app_id, config_version_id: made.config_version_id, created: false });
    expect(await db.agentConfigVersion.count({ where: { agent_id: agent.id } })).toBe(1);
  });

  it('app: an invalid config is refused, naming the field', () => {
    const file = writeJson('bad-agent.json', {
      prompt: { system_prompt: 'x' },
      model: { provider: 'demo' },
      tools: { core: ['no_such_tool'] },
    });
    const r = admin(['app', '--tenant', 'Acme', '--name', 'Broken', '--config', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/invalid agent config: .*model/);
  });

  it('app keys: shown once, hashed at rest, --if-none does not issue a second', async () => {
    const first = admin(['app-key', '--tenant', 'Acme', '--app', 'Support', '--if-none']).json!;
    expect(first.api_key).toMatch(/^app-/);
    expect(admin(['app-key', '--tenant', 'Acme', '--app', 'Support', '--if-none']).json).toMatchObject({ api_key: null, created: false });
    const rotated = admin(['app-key', '--tenant', 'Acme', '--app', 'Support']).json!;
    expect(rotated.api_key).not.toBe(first.api_key);
    const tokens = await db.apiToken.findMany({ where: { app_id: first.app_id as string } });
    expect(tokens.map((t) => t.token_hash).sort()).toEqual(
      [hashApiKey(first.api_key as string), hashApiKey(rotated.api_key as string)].sort(),
    );
    expect(admin(['app-key', '--tenant', 'Acme', '--app', 'Nope']).status).toBe(1);
  });

  it('provider credentials: validated, stored encrypted, rotated in place', async () => {
    const creds = { base_url: 'https://llm.acme.test/v1', api_key: 'sk-first-secret' };
    expect(
      admin(['credentials', '--tenant', 'Acme', '--provider', 'openai_compatible', '--env', 'CREDS'], { CREDS: JSON.stringify(creds) })
        .json,
    ).toMatchObject({
      stored: true,
    });
    const row = await db.modelProviderCredential.findFirstOrThrow({ where: { tenant_id: tenantId, provider: 'openai_compatible' } });
    expect(row.encrypted_config).not.toContain('sk-first-secret');
    expect(await loadCredentials(db, ENCRYPTION_KEY, tenantId, 'openai_compatible')).toEqual(creds);

    const file = writeJson('creds.json', { ...creds, api_key: 'sk-rotated' });
    expect(admin(['credentials', '--tenant', 'Acme', '--provider', 'openai_compatible', '--file', file]).status).toBe(0);
    expect(await loadCredentials(db, ENCRYPTION_KEY, tenantId, 'openai_compatible')).toEqual({ ...creds, api_key: 'sk-rotated' });
    expect(await db.modelProviderCredential.count({ where: { tenant_id: tenantId } })).toBe(1);

    const bad = admin(['credentials', '--tenant', 'Acme', '--provider', 'openai_compatible', '--env', 'CREDS'], {
      CREDS: '{"base_url":"not a url"}',
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/base_url/);
    expect(admin(['credentials', '--tenant', 'Acme', '--provider', 'nope', '--file', file]).stderr).toMatch(/unknown provider "nope"/);
  });

  it('credit pool: set, then changed, keeping what was used', async () => {
    expect(admin(['credit-pool', '--tenant', 'Acme', '--limit', '5000']).json).toEqual({ limit: '5000', used: '0' });
    await db.creditPool.update({ where: { tenant_id: tenantId }, data: { quota_used: 1200n } });
    expect(admin(['credit-pool', '--tenant', 'Acme', '--limit', '9000']).json).toEqual({ limit: '9000', used: '1200' });
    expect(admin(['credit-pool', '--tenant', 'Acme', '--limit', '-3']).status).toBe(2);
  });

  it('provision: everything from one file, and a re-run changes nothing and reuses the keys', async () => {
    const spec = writeJson('provision.json', {
      tenant: 'Beta Corp',
      credit_limit: 250000,
      accounts: [{ email: 'admin@beta.test', name: 'Admin' }],
      credentials: [{ provider: 'openai_compatible', env: 'BETA_CREDS' }],
      apps: [{ name: 'Helpdesk', description: 'First line' }],
    });
    const env = { BETA_CREDS: JSON.stringify({ base_url: 'https://llm.beta.test/v1' }) };
    const keyDir = path.join(DIR, 'beta-keys');
    const first = admin(['provision', '--file', spec, '--key-dir', keyDir], env);
    expect(first.status, first.stderr).toBe(0);
    const out = first.json as {
      tenant: { tenant_id: string };
      apps: { app_id: string; api_key: string; created: boolean }[];
      accounts: { console_key: string }[];
    };
    expect(out.apps[0]).toMatchObject({ created: true });
    expect(out.apps[0]!.api_key).toMatch(/^app-/);
    expect(out.accounts[0]!.console_key).toMatch(/^console-/);
    expect(fs.readdirSync(keyDir).sort()).toEqual(['admin-beta-test.console-key', 'helpdesk.app-key']);

    const second = admin(['provision', '--file', spec, '--key-dir', keyDir], env).json as typeof out;
    expect(second.tenant.tenant_id).toBe(out.tenant.tenant_id);
    expect(second.apps[0]).toMatchObject({ app_id: out.apps[0]!.app_id, api_key: out.apps[0]!.api_key, created: false });
    expect(second.accounts[0]!.console_key).toBe(out.accounts[0]!.console_key);
    expect(await db.apiToken.count({ where: { app_id: out.apps[0]!.app_id } })).toBe(1);
    expect((await db.creditPool.findUniqueOrThrow({ where: { tenant_id: out.tenant.tenant_id } })).quota_limit).toBe(250000n);

    expect(admin(['provision', '--file', writeJson('bad-spec.json', { tenant: 'X', unknown: 1 })]).stderr).toMatch(/provision file/);
    // The example the compose `provision` job mounts is a valid file.
    expect(admin(['provision', '--file', path.join(ROOT, 'deploy', 'provision.json')]).status).toBe(0);
  });

  it("npm start's demo seeding is the same code: the CLI finds the demo app, the seeding finds what it made", async () => {
    const dataDir = path.join(DIR, 'demo');
    const demo = await ensureDemoData(db, { dataDir });
    const found = admin(['app', '--tenant', DEMO_TENANT_NAME, '--name', 'Demo Agent']).json!;
    expect(found).toMatchObject({ app_id: demo.appId, agent_id: demo.agentId, config_version_id: demo.configVersionId, created: false });
    const again = await ensureDemoData(db, { dataDir });
    expect(again).toEqual(demo);
  });

  it('secrets: the compose secret files, random, created once and never overwritten', () => {
    const dir = path.join(DIR, 'secrets');
    const first = admin(['secrets', '--dir', dir], { DATABASE_URL: '' }).json!;
    expect((first.created as string[]).sort()).toEqual([
      'agent_backend_token',
      'database_url',
      'encryption_key',
      'execution_context_signing_key',
      'inner_api_key',
      'postgres_password',
      'shellctl_auth_token',
    ]);
    const password = fs.readFileSync(path.join(dir, 'postgres_password'), 'utf8').trim();
    expect(fs.readFileSync(path.join(dir, 'database_url'), 'utf8').trim()).toBe(`postgresql://dify:${password}@postgres:5432/dify_agent`);
    expect(fs.readFileSync(path.join(dir, 'encryption_key'), 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
    const before = fs.readFileSync(path.join(dir, 'inner_api_key'), 'utf8');
    expect(admin(['secrets', '--dir', dir], { DATABASE_URL: '' }).json).toMatchObject({ created: [] });
    expect(fs.readFileSync(path.join(dir, 'inner_api_key'), 'utf8')).toBe(before);
  });
});
