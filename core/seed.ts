/**
 * Demo data created on first start: a tenant, an account, an agent app with an app API key, and an agent
 * with a published config version using the demo model. Idempotent: a second start finds it again.
 * The plaintext key is kept in DATA_DIR (dev only) so `npm start` can print it every time.
 */
import { createSharedDraft, findSharedDraft, publishVersion } from './agent-configs.js';
import fs from 'node:fs';
import path from 'node:path';
import { generateAppApiKey, hashApiKey } from './api-keys.js';
import type { Db } from './db.js';
import { demoSoulConfig, type AgentSoulConfig } from './soul.js';

export interface DemoData {
  tenantId: string;
  accountId: string;
  appId: string;
  agentId: string;
  configVersionId: string;
  apiKey: string;
  /** The demo account's console key (console API). */
  consoleKey: string;
}

export const DEMO_TENANT_NAME = 'Demo workspace';

export async function ensureDemoData(db: Db, opts: { dataDir: string; soul?: AgentSoulConfig; creditQuota?: bigint }): Promise<DemoData> {
  const keyFile = path.join(opts.dataDir, 'demo-app-key.txt');
  const consoleKeyFile = path.join(opts.dataDir, 'demo-console-key.txt');
  const existing = await db.tenant.findFirst({
    where: { name: DEMO_TENANT_NAME },
    include: { apps: { include: { agent: true } }, accounts: true },
  });
  if (existing && existing.apps[0]?.agent?.active_config_snapshot_id && fs.existsSync(keyFile) && fs.existsSync(consoleKeyFile)) {
    const apiKey = fs.readFileSync(keyFile, 'utf8').trim();
    const consoleKey = fs.readFileSync(consoleKeyFile, 'utf8').trim();
    const token = await db.apiToken.findUnique({ where: { token_hash: hashApiKey(apiKey) } });
    const ctoken = await db.consoleToken.findUnique({ where: { token_hash: hashApiKey(consoleKey) } });
    if (token && !token.revoked_at && ctoken && !ctoken.revoked_at) {
      const app = existing.apps[0];
      return {
        tenantId: existing.id,
        accountId: existing.accounts[0]!.id,
        appId: app.id,
        agentId: app.agent!.id,
        configVersionId: app.agent!.active_config_snapshot_id!,
        apiKey,
        consoleKey,
      };
    }
  }
  const soul = opts.soul ?? demoSoulConfig();
  const { key, hash, prefix } = generateAppApiKey();
  const consoleKey = `console-${generateAppApiKey().key.slice(4)}`;
  const data = await db.$transaction(async (tx) => {
    const tenant = existing ?? (await tx.tenant.create({ data: { name: DEMO_TENANT_NAME } }));
    const account =
      (await tx.account.findFirst({ where: { tenant_id: tenant.id } })) ??
      (await tx.account.create({ data: { tenant_id: tenant.id, email: `demo+${tenant.id.slice(0, 8)}@example.com`, name: 'Demo Owner' } }));
    let app = await tx.app.findFirst({ where: { tenant_id: tenant.id }, include: { agent: true } });
    if (!app) {
      app = await tx.app.create({
        data: { tenant_id: tenant.id, name: 'Demo Agent', mode: 'agent', description: 'An Agent App on the deterministic demo model.' },
        include: { agent: true },
      });
    }
    const agent = app.agent ?? (await tx.agent.create({ data: { tenant_id: tenant.id, app_id: app.id, name: 'Demo Agent' } }));
    let versionId = agent.active_config_snapshot_id;
    if (!versionId) {
      versionId = (await publishVersion(tx, { tenantId: tenant.id, agentId: agent.id, createdBy: account.id }, soul)).id;
    }
    if (!(await findSharedDraft(tx, agent.id)))
      await createSharedDraft(tx, { tenantId: tenant.id, agentId: agent.id, baseVersionId: versionId }, soul);
    await tx.apiToken.create({ data: { tenant_id: tenant.id, app_id: app.id, token_hash: hash, token_prefix: prefix, name: 'demo' } });
    await tx.consoleToken.create({ data: { tenant_id: tenant.id, account_id: account.id, token_hash: hashApiKey(consoleKey) } });
    await tx.creditPool.upsert({
      where: { tenant_id: tenant.id },
      update: {},
      create: { tenant_id: tenant.id, quota_limit: opts.creditQuota ?? 100_000_000n },
    });
    return { tenantId: tenant.id, accountId: account.id, appId: app.id, agentId: agent.id, configVersionId: versionId };
  });
  fs.mkdirSync(opts.dataDir, { recursive: true });
  fs.writeFileSync(keyFile, key + '\n', { mode: 0o600 });
  fs.writeFileSync(consoleKeyFile, consoleKey + '\n', { mode: 0o600 });
  return { ...data, apiKey: key, consoleKey };
}

/** Creates one more agent app with its own key (tests: isolation, fresh configs). */
export async function createAgentApp(
  db: Db,
  tenantId: string,
  opts: { name: string; soul?: AgentSoulConfig },
): Promise<{ appId: string; agentId: string; configVersionId: string; apiKey: string }> {
  const soul = opts.soul ?? demoSoulConfig();
  const { key, hash, prefix } = generateAppApiKey();
  return db.$transaction(async (tx) => {
    const app = await tx.app.create({ data: { tenant_id: tenantId, name: opts.name, mode: 'agent' } });
    const agent = await tx.agent.create({ data: { tenant_id: tenantId, app_id: app.id, name: opts.name } });
    const v = await publishVersion(tx, { tenantId, agentId: agent.id, createdBy: null }, soul);
    await createSharedDraft(tx, { tenantId, agentId: agent.id, baseVersionId: v.id }, soul);
    await tx.apiToken.create({ data: { tenant_id: tenantId, app_id: app.id, token_hash: hash, token_prefix: prefix } });
    return { appId: app.id, agentId: agent.id, configVersionId: v.id, apiKey: key };
  });
}
