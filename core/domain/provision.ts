/**
 * Provisioning: the steps that make a deployment usable — a tenant, accounts with console keys, agent apps
 * with a first published config and app API keys, provider credentials (encrypted) and the credit pool.
 * Every step is idempotent (found by its natural name, created when missing, serialised by an advisory lock
 * so two init jobs racing cannot create twins), so the admin CLI (cli/admin.ts) can run at every deployment
 * and `npm start`'s demo seeding (core/domain/seed.ts) is the same code.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createSharedDraft, findSharedDraft, publishVersion } from './agent-configs.js';
import { generateAppApiKey, hashApiKey } from './api-keys.js';
import type { Db, Prisma } from '../platform/db.js';
import { saveCredentials, type EncryptionKey } from './llm/credentials.js';
import type { ProviderRegistry } from './llm/provider.js';
import type { AgentSoulConfig } from './soul.js';

type Tx = Prisma.TransactionClient;

export class ProvisionError extends Error {
  override name = 'ProvisionError';
}

/** A transaction-scoped lock on one natural key: concurrent provisioners of the same name run one after the other. */
async function lockName(tx: Tx, scope: string, name: string): Promise<void> {
  await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`${scope}:${name}`}, 17))`;
}

export interface Ensured {
  id: string;
  created: boolean;
}

/** The tenant called `name` (created when missing). Two tenants of one name make the name ambiguous: refused. */
export async function ensureTenant(db: Db, name: string): Promise<Ensured> {
  return db.$transaction(async (tx) => {
    await lockName(tx, 'tenant', name);
    const found = await tx.tenant.findMany({ where: { name }, select: { id: true }, take: 2 });
    if (found.length > 1) throw new ProvisionError(`two tenants are named "${name}": refer to the tenant by its id`);
    if (found[0]) return { id: found[0].id, created: false };
    return { id: (await tx.tenant.create({ data: { name } })).id, created: true };
  });
}

/** A tenant given by id or by name (must exist). */
export async function findTenant(db: Db, ref: string): Promise<string> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref);
  const found = await db.tenant.findMany({ where: isUuid ? { id: ref } : { name: ref }, select: { id: true }, take: 2 });
  if (found.length > 1) throw new ProvisionError(`two tenants are named "${ref}": refer to the tenant by its id`);
  if (!found[0]) throw new ProvisionError(`no tenant ${isUuid ? 'with id' : 'named'} "${ref}"`);
  return found[0].id;
}

/** The account with this email in this tenant (emails are unique across tenants). */
export async function ensureAccount(db: Db, p: { tenantId: string; email: string; name: string }): Promise<Ensured> {
  return db.$transaction(async (tx) => {
    await lockName(tx, 'account', p.email);
    const found = await tx.account.findUnique({ where: { email: p.email }, select: { id: true, tenant_id: true } });
    if (found && found.tenant_id !== p.tenantId) throw new ProvisionError(`the account ${p.email} belongs to another tenant`);
    if (found) return { id: found.id, created: false };
    return { id: (await tx.account.create({ data: { tenant_id: p.tenantId, email: p.email, name: p.name } })).id, created: true };
  });
}

export interface AgentAppIds {
  appId: string;
  agentId: string;
  /** The agent's active published version. */
  configVersionId: string;
}

/** A new agent app: the app, its agent, `soul` published as version 1 and the shared draft starting from it. */
export async function createAppWithAgent(
  tx: Tx,
  p: { tenantId: string; name: string; description?: string; icon?: string; createdBy: string | null },
  soul: AgentSoulConfig,
): Promise<AgentAppIds> {
  const app = await tx.app.create({
    data: { tenant_id: p.tenantId, name: p.name, mode: 'agent', description: p.description ?? '', ...(p.icon ? { icon: p.icon } : {}) },
  });
  const agent = await tx.agent.create({ data: { tenant_id: p.tenantId, app_id: app.id, name: p.name } });
  const v = await publishVersion(tx, { tenantId: p.tenantId, agentId: agent.id, createdBy: p.createdBy }, soul);
  await createSharedDraft(tx, { tenantId: p.tenantId, agentId: agent.id, baseVersionId: v.id }, soul);
  return { appId: app.id, agentId: agent.id, configVersionId: v.id };
}

/**
 * A new agent app called `name` (the studio's "New agent", api/console/admin.ts), or null when the tenant
 * already has an app of that name: names stay unique per tenant, as `ensureAgentApp` (and the demo seed) need.
 */
export async function createUniqueAgentApp(
  db: Db,
  p: { tenantId: string; name: string; description?: string; icon?: string; createdBy: string | null },
  soul: AgentSoulConfig,
): Promise<AgentAppIds | null> {
  return db.$transaction(async (tx) => {
    await lockName(tx, `app:${p.tenantId}`, p.name);
    if (await tx.app.findFirst({ where: { tenant_id: p.tenantId, name: p.name }, select: { id: true } })) return null;
    return createAppWithAgent(tx, p, soul);
  });
}

/**
 * The tenant's agent app called `name`, with an agent and a published config. An existing app keeps its
 * config (new versions are published through the console API, where they are reviewed and numbered); only
 * what is missing (agent, first version, shared draft) is completed from `soul`.
 */
export async function ensureAgentApp(
  db: Db,
  p: { tenantId: string; name: string; description?: string; createdBy: string | null },
  soul: AgentSoulConfig,
): Promise<AgentAppIds & { created: boolean }> {
  return db.$transaction(async (tx) => {
    await lockName(tx, `app:${p.tenantId}`, p.name);
    const found = await tx.app.findMany({ where: { tenant_id: p.tenantId, name: p.name }, include: { agent: true }, take: 2 });
    if (found.length > 1) throw new ProvisionError(`two apps of this tenant are named "${p.name}"`);
    const app = found[0];
    if (!app) return { ...(await createAppWithAgent(tx, p, soul)), created: true };
    const agent = app.agent ?? (await tx.agent.create({ data: { tenant_id: p.tenantId, app_id: app.id, name: p.name } }));
    const versionId =
      agent.active_config_snapshot_id ??
      (await publishVersion(tx, { tenantId: p.tenantId, agentId: agent.id, createdBy: p.createdBy }, soul)).id;
    if (!(await findSharedDraft(tx, agent.id)))
      await createSharedDraft(tx, { tenantId: p.tenantId, agentId: agent.id, baseVersionId: versionId }, soul);
    return { appId: app.id, agentId: agent.id, configVersionId: versionId, created: false };
  });
}

/** An app of the tenant by id or name (must exist). */
export async function findApp(db: Db, tenantId: string, ref: string): Promise<string> {
  const found = await db.app.findMany({
    where: { tenant_id: tenantId, OR: [{ name: ref }, ...(isUuid(ref) ? [{ id: ref }] : [])] },
    take: 2,
  });
  if (found.length > 1) throw new ProvisionError(`two apps of this tenant are named "${ref}": refer to the app by its id`);
  if (!found[0]) throw new ProvisionError(`the tenant has no app "${ref}"`);
  return found[0].id;
}

const isUuid = (s: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s);

/** A new app API key; the plaintext exists only in the return value (the database keeps its SHA-256). */
export async function issueAppKey(db: Db | Tx, p: { tenantId: string; appId: string; name?: string }): Promise<string> {
  const { key, hash, prefix } = generateAppApiKey();
  await db.apiToken.create({
    data: { tenant_id: p.tenantId, app_id: p.appId, token_hash: hash, token_prefix: prefix, name: p.name ?? 'default' },
  });
  return key;
}

/** A new console key of the account (console API), shown once like an app key. */
export async function issueConsoleKey(db: Db | Tx, p: { tenantId: string; accountId: string }): Promise<string> {
  const key = `console-${generateAppApiKey().key.slice(4)}`;
  await db.consoleToken.create({ data: { tenant_id: p.tenantId, account_id: p.accountId, token_hash: hashApiKey(key) } });
  return key;
}

/** Whether `key` is an unrevoked app key of this app / console key of this account. */
export async function appKeyIsActive(db: Db, appId: string, key: string): Promise<boolean> {
  const t = await db.apiToken.findUnique({ where: { token_hash: hashApiKey(key) }, select: { app_id: true, revoked_at: true } });
  return Boolean(t && t.app_id === appId && !t.revoked_at);
}

export async function consoleKeyIsActive(db: Db, accountId: string, key: string): Promise<boolean> {
  const t = await db.consoleToken.findUnique({ where: { token_hash: hashApiKey(key) }, select: { account_id: true, revoked_at: true } });
  return Boolean(t && t.account_id === accountId && !t.revoked_at);
}

/**
 * Keys kept in a file (a compose init job's volume, `npm start`'s DATA_DIR): the key in `file` when it is still
 * valid, else a new one written there (0600). Without a file every call issues a new key — keys are shown once.
 */
export async function ensureKeyInFile(
  file: string | undefined,
  isActive: (key: string) => Promise<boolean>,
  issue: () => Promise<string>,
): Promise<{ key: string; created: boolean }> {
  if (file && fs.existsSync(file)) {
    const key = fs.readFileSync(file, 'utf8').trim();
    if (key && (await isActive(key))) return { key, created: false };
  }
  const key = await issue();
  if (file) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, key + '\n', { mode: 0o600 });
  }
  return { key, created: true };
}

/**
 * The tenant's credit pool limit (in credits). `keepExisting`: only create the pool when missing (the demo
 * seeding must not reset a limit an operator changed); otherwise set the limit, keeping what was used.
 */
export async function setCreditPool(db: Db, tenantId: string, limit: bigint, opts: { keepExisting?: boolean } = {}) {
  if (limit < 0n) throw new ProvisionError('the credit limit must not be negative');
  return db.creditPool.upsert({
    where: { tenant_id: tenantId },
    update: opts.keepExisting ? {} : { quota_limit: limit },
    create: { tenant_id: tenantId, quota_limit: limit },
    select: { quota_limit: true, quota_used: true },
  });
}

/**
 * Stores (or rotates: replaces) the tenant's credentials for a provider, encrypted with ENCRYPTION_KEY. The
 * provider validates them first (names the bad field), so a typo is refused here rather than at the first turn.
 */
export async function storeProviderCredentials(
  db: Db,
  p: { encryptionKey: EncryptionKey; providers: ProviderRegistry; tenantId: string; provider: string; credentials: unknown },
): Promise<void> {
  const provider = p.providers.get(p.provider);
  if (!provider)
    throw new ProvisionError(
      `unknown provider "${p.provider}" (this deployment offers: ${p.providers
        .list()
        .map((x) => x.name)
        .join(', ')})`,
    );
  let parsed;
  try {
    parsed = provider.parseCredentials(p.credentials);
  } catch (err) {
    throw new ProvisionError(`invalid credentials for ${p.provider}: ${(err as Error).message}`);
  }
  await saveCredentials(db, p.encryptionKey, p.tenantId, p.provider, parsed);
}
