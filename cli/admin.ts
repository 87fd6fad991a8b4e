/**
 * The admin CLI: provisions a deployment (core/domain/provision.ts) against DATABASE_URL — `npm run admin -- <command>`
 * from sources, `node dist/cli/admin.js <command>` compiled (the image, the compose `provision` job).
 * Every command is idempotent and prints one JSON object on stdout; errors go to stderr (exit 2: bad usage,
 * 1: refused or failed). Run `admin help` for the commands.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig, type Config } from '../core/platform/config.js';
import { createDb, type Db } from '../core/platform/db.js';
import { createDefaultProviders, demoAgentModel } from '../core/domain/llm/providers/index.js';
import { redactSecrets } from '../core/domain/llm/redact.js';
import {
  appKeyIsActive,
  consoleKeyIsActive,
  ensureAccount,
  ensureAgentApp,
  ensureKeyInFile,
  ensureTenant,
  findApp,
  findTenant,
  issueAppKey,
  issueConsoleKey,
  ProvisionError,
  setCreditPool,
  storeProviderCredentials,
} from '../core/domain/provision.js';
import { AgentSoulConfig, demoSoulConfig } from '../core/domain/soul.js';

const HELP = `admin <command> [options]   (DATABASE_URL; ENCRYPTION_KEY for credentials)

  tenant       --name N                                   ensure the tenant
  account      --tenant T --email E [--name N]            ensure an account of the tenant
  console-key  --tenant T --email E [KEY]                 a console key of the account
  app          --tenant T --name N [--config F.json] [--description D] [--created-by EMAIL]
                                                          ensure an agent app, its agent and a first published config
  app-key      --tenant T --app A [--name N] [KEY]        an app API key
  credentials  --tenant T --provider P (--file F.json | --env VAR) [--validate]
                                                          store or rotate provider credentials (encrypted); with
                                                          --validate a real one-word call checks them first
  providers                                               the model providers, which ones this deployment hosts
                                                          (billed through credit pools: docs/models.md)
  credit-pool  --tenant T --limit CREDITS                 set the tenant's credit pool limit
  provision    --file spec.json [--key-dir DIR]           all of the above from one file (docs/operations.md)
  secrets      --dir DIR                                  docker-compose.yml's secret files, random, where missing
                                                          (no database needed)

  T: tenant id or name; A: app id or name.
  KEY: --key-file F  reuse the key in F while it is valid, else issue one and write it to F (0600)
       --if-none     issue a key only when there is no active one (printed once, never again)
       (neither)     issue a new key (rotation: revoke old ones in the console)`;

class UsageError extends Error {}

const OPTIONS = {
  name: { type: 'string' },
  tenant: { type: 'string' },
  email: { type: 'string' },
  app: { type: 'string' },
  config: { type: 'string' },
  description: { type: 'string' },
  'created-by': { type: 'string' },
  provider: { type: 'string' },
  file: { type: 'string' },
  env: { type: 'string' },
  limit: { type: 'string' },
  'key-file': { type: 'string' },
  'key-dir': { type: 'string' },
  dir: { type: 'string' },
  'if-none': { type: 'boolean' },
  validate: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Opts = Partial<Record<keyof typeof OPTIONS, string | boolean>>;

function need(opts: Opts, name: keyof typeof OPTIONS): string {
  const v = opts[name];
  if (typeof v !== 'string' || !v.trim()) throw new UsageError(`--${name} is required`);
  return v.trim();
}

function readJson(file: string, what: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`${what} ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${what} ${file} is not JSON: ${(err as Error).message}`);
  }
}

/** An agent soul config from a file (validated like the console's), or the default agent on the configured model. */
function soulFrom(config: Config, raw: unknown | undefined): AgentSoulConfig {
  if (raw === undefined) return demoSoulConfig(demoAgentModel(config));
  const r = AgentSoulConfig.safeParse(raw);
  if (!r.success)
    throw new UsageError(`invalid agent config: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return r.data;
}

function creditLimit(v: string | number): bigint {
  if (!/^\d+$/.test(String(v))) throw new UsageError(`the credit limit must be a whole number of credits, got "${v}"`);
  return BigInt(v);
}

type KeyMode = { file?: string; ifNone?: boolean };

/** Issues (or reuses, see HELP) a key: `hasActive` answers --if-none, `isActive` checks a key file's key. */
async function key(
  mode: KeyMode,
  isActive: (k: string) => Promise<boolean>,
  hasActive: () => Promise<boolean>,
  issue: () => Promise<string>,
) {
  if (mode.file) return ensureKeyInFile(mode.file, isActive, issue);
  if (mode.ifNone && (await hasActive())) return { key: null, created: false };
  return { key: await issue(), created: true };
}

const keyMode = (opts: Opts): KeyMode => ({ file: opts['key-file'] as string | undefined, ifNone: opts['if-none'] === true });

async function consoleKey(db: Db, tenantId: string, email: string, mode: KeyMode) {
  const account = await db.account.findUnique({ where: { email }, select: { id: true, tenant_id: true } });
  if (!account || account.tenant_id !== tenantId) throw new ProvisionError(`the tenant has no account ${email}`);
  const r = await key(
    mode,
    (k) => consoleKeyIsActive(db, account.id, k),
    async () => (await db.consoleToken.count({ where: { account_id: account.id, revoked_at: null } })) > 0,
    () => issueConsoleKey(db, { tenantId, accountId: account.id }),
  );
  return { account_id: account.id, console_key: r.key, created: r.created };
}

async function appKey(db: Db, tenantId: string, appId: string, mode: KeyMode, name?: string) {
  const r = await key(
    mode,
    (k) => appKeyIsActive(db, appId, k),
    async () => (await db.apiToken.count({ where: { app_id: appId, revoked_at: null } })) > 0,
    () => issueAppKey(db, { tenantId, appId, name }),
  );
  return { app_id: appId, api_key: r.key, created: r.created };
}

async function credentials(db: Db, config: Config, tenantId: string, provider: string, raw: unknown, validate = false) {
  const providers = createDefaultProviders(config);
  const p = providers.get(provider);
  if (validate && p?.checkCredentials) {
    let parsed;
    try {
      parsed = p.parseCredentials(raw);
    } catch (err) {
      throw new ProvisionError(`invalid credentials for ${provider}: ${(err as Error).message}`);
    }
    try {
      await p.checkCredentials(parsed, { signal: AbortSignal.timeout(30_000) });
    } catch (err) {
      throw new ProvisionError(`the ${provider} credentials did not work: ${redactSecrets((err as Error).message)}`);
    }
  }
  await storeProviderCredentials(db, {
    encryptionKey: config.ENCRYPTION_KEY,
    providers,
    tenantId,
    provider,
    credentials: raw,
  });
  return { tenant_id: tenantId, provider, stored: true };
}

function credentialsFrom(opts: { file?: string; env?: string }, env: NodeJS.ProcessEnv): unknown {
  if (opts.file) return readJson(opts.file, 'credentials file');
  if (opts.env) {
    const v = env[opts.env];
    if (!v) throw new UsageError(`the environment variable ${opts.env} is not set`);
    try {
      return JSON.parse(v);
    } catch {
      throw new UsageError(`${opts.env} does not hold JSON credentials`);
    }
  }
  throw new UsageError('give the credentials with --file F.json or --env VAR');
}

/** The `provision` file: one tenant and what it needs. Secrets come from files or the environment, not this file. */
const Spec = z
  .object({
    tenant: z.string().min(1),
    credit_limit: z.union([z.number().int().nonnegative(), z.string().regex(/^\d+$/)]).optional(),
    accounts: z
      .array(z.object({ email: z.string().email(), name: z.string().min(1).optional(), console_key: z.boolean().default(true) }).strict())
      .default([]),
    credentials: z
      .array(z.object({ provider: z.string().min(1), file: z.string().optional(), env: z.string().optional() }).strict())
      .default([]),
    apps: z
      .array(
        z
          .object({
            name: z.string().min(1),
            description: z.string().optional(),
            config: z.unknown().optional(),
            config_file: z.string().optional(),
            api_key: z.boolean().default(true),
          })
          .strict(),
      )
      .default([]),
  })
  .strict();

const random = (bytes: number, encoding: BufferEncoding) => crypto.randomBytes(bytes).toString(encoding);

/**
 * The secret files docker-compose.yml mounts, each created with a random value when missing (never overwritten:
 * rotating one is a deliberate act, docs/operations.md). The directory is 0700; the files 0644, because compose
 * bind-mounts them as they are and the containers' non-root users (node, temporal) must read them.
 */
function writeComposeSecrets(dir: string): { dir: string; created: string[]; kept: string[] } {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const file = (name: string) => path.join(dir, name);
  const created: string[] = [];
  const kept: string[] = [];
  const ensure = (name: string, value: () => string) => {
    if (fs.existsSync(file(name))) return kept.push(name);
    fs.writeFileSync(file(name), value() + '\n', { mode: 0o644 });
    created.push(name);
  };
  ensure('postgres_password', () => random(24, 'hex'));
  const password = fs.readFileSync(file('postgres_password'), 'utf8').trim();
  ensure('database_url', () => `postgresql://dify:${encodeURIComponent(password)}@postgres:5432/dify_agent`);
  for (const name of ['inner_api_key', 'agent_backend_token', 'execution_context_signing_key', 'shellctl_auth_token'])
    ensure(name, () => random(32, 'base64url'));
  ensure('encryption_key', () => random(32, 'hex'));
  return { dir: path.resolve(dir), created, kept };
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '') || 'x';

async function provision(db: Db, config: Config, file: string, keyDir: string | undefined, env: NodeJS.ProcessEnv) {
  const parsed = Spec.safeParse(readJson(file, 'provision file'));
  if (!parsed.success)
    throw new UsageError(`provision file: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const spec = parsed.data;
  const base = path.dirname(path.resolve(file));
  const at = (f: string) => path.resolve(base, f);
  // With a key directory the keys live there (re-runs reuse them); without, a key is issued only when none is active.
  const mode = (name: string): KeyMode => (keyDir ? { file: path.join(keyDir, name) } : { ifNone: true });
  const tenant = await ensureTenant(db, spec.tenant);
  const out: Record<string, unknown> = {
    tenant: { tenant_id: tenant.id, created: tenant.created },
    accounts: [],
    apps: [],
    credentials: [],
  };
  let owner: string | null = null;
  for (const a of spec.accounts) {
    const acc = await ensureAccount(db, { tenantId: tenant.id, email: a.email, name: a.name ?? a.email });
    owner ??= acc.id;
    const ck = a.console_key ? await consoleKey(db, tenant.id, a.email, mode(`${slug(a.email)}.console-key`)) : null;
    (out.accounts as unknown[]).push({ email: a.email, account_id: acc.id, created: acc.created, console_key: ck?.console_key ?? null });
  }
  for (const c of spec.credentials)
    (out.credentials as unknown[]).push(
      await credentials(db, config, tenant.id, c.provider, credentialsFrom({ file: c.file && at(c.file), env: c.env }, env)),
    );
  if (spec.credit_limit !== undefined) {
    const pool = await setCreditPool(db, tenant.id, creditLimit(spec.credit_limit));
    out.credit_pool = { limit: pool.quota_limit.toString(), used: pool.quota_used.toString() };
  }
  for (const a of spec.apps) {
    const raw = a.config_file ? readJson(at(a.config_file), 'agent config file') : a.config;
    const app = await ensureAgentApp(
      db,
      { tenantId: tenant.id, name: a.name, description: a.description, createdBy: owner },
      soulFrom(config, raw),
    );
    const k = a.api_key ? await appKey(db, tenant.id, app.appId, mode(`${slug(a.name)}.app-key`)) : null;
    (out.apps as unknown[]).push({
      name: a.name,
      app_id: app.appId,
      agent_id: app.agentId,
      config_version_id: app.configVersionId,
      created: app.created,
      api_key: k?.api_key ?? null,
    });
  }
  return out;
}

async function run(db: Db, config: Config, command: string, opts: Opts, env: NodeJS.ProcessEnv): Promise<unknown> {
  const tenant = () => findTenant(db, need(opts, 'tenant'));
  switch (command) {
    case 'tenant': {
      const t = await ensureTenant(db, need(opts, 'name'));
      return { tenant_id: t.id, created: t.created };
    }
    case 'account': {
      const email = need(opts, 'email');
      if (!z.string().email().safeParse(email).success) throw new UsageError(`--email ${email} is not an email address`);
      const a = await ensureAccount(db, { tenantId: await tenant(), email, name: (opts.name as string | undefined) ?? email });
      return { account_id: a.id, created: a.created };
    }
    case 'console-key':
      return consoleKey(db, await tenant(), need(opts, 'email'), keyMode(opts));
    case 'app': {
      const tenantId = await tenant();
      const createdBy = opts['created-by']
        ? ((await db.account.findFirst({ where: { tenant_id: tenantId, email: opts['created-by'] as string } }))?.id ?? null)
        : null;
      const raw = opts.config ? readJson(opts.config as string, 'agent config file') : undefined;
      const name = need(opts, 'name');
      const a = await ensureAgentApp(
        db,
        { tenantId, name, description: opts.description as string | undefined, createdBy },
        soulFrom(config, raw),
      );
      return { app_id: a.appId, agent_id: a.agentId, config_version_id: a.configVersionId, created: a.created };
    }
    case 'app-key': {
      const tenantId = await tenant();
      return appKey(db, tenantId, await findApp(db, tenantId, need(opts, 'app')), keyMode(opts), opts.name as string | undefined);
    }
    case 'credentials':
      return credentials(
        db,
        config,
        await tenant(),
        need(opts, 'provider'),
        credentialsFrom({ file: opts.file as string | undefined, env: opts.env as string | undefined }, env),
        opts.validate === true,
      );
    case 'credit-pool': {
      const pool = await setCreditPool(db, await tenant(), creditLimit(need(opts, 'limit')));
      return { limit: pool.quota_limit.toString(), used: pool.quota_used.toString() };
    }
    case 'provision':
      return provision(db, config, need(opts, 'file'), opts['key-dir'] as string | undefined, env);
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    console.error(`admin: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  const [command, ...extra] = parsed.positionals;
  if (!command || command === 'help' || parsed.values.help) {
    console.log(HELP);
    return command || parsed.values.help ? 0 : 2;
  }
  if (extra.length) {
    console.error(`admin: unexpected argument ${extra[0]}`);
    return 2;
  }
  if (command === 'secrets') {
    if (!parsed.values.dir) {
      console.error('admin: --dir is required');
      return 2;
    }
    console.log(JSON.stringify(writeComposeSecrets(parsed.values.dir)));
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    console.error(`admin: ${(err as Error).message}`);
    return 2;
  }
  if (command === 'providers') {
    // No database needed: what this deployment's environment hosts.
    const data = createDefaultProviders(config)
      .list()
      .map((p) => ({ provider: p.name, system_hosted: p.hasSystemCredentials(), models: p.models().map((m) => m.model) }));
    console.log(JSON.stringify({ providers: data }));
    return 0;
  }
  if (!config.DATABASE_URL) {
    console.error('admin: DATABASE_URL is not set');
    return 2;
  }
  const db = createDb(config.DATABASE_URL, { max: 2 });
  try {
    console.log(JSON.stringify(await run(db, config, command, parsed.values, env)));
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`admin: ${err.message}`);
      return 2;
    }
    if (err instanceof ProvisionError) {
      console.error(`admin: ${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    await db.$disconnect();
  }
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href;
if (invokedDirectly) process.exitCode = await main(process.argv.slice(2));
