/**
 * Demo data created on first start: a tenant, an account, an agent app with an app API key, and an agent
 * with a published config version using the demo model. Idempotent: a second start finds it again.
 * The plaintext keys are kept in DATA_DIR (dev only) so `npm start` can print them every time.
 * The steps are the provisioning steps of core/domain/provision.ts, the ones the admin CLI runs in production.
 */
import path from 'node:path';
import { findSharedDraft, findVersion, publishVersion, updateDraft } from './agent-configs.js';
import type { Db } from '../platform/db.js';
import {
  appKeyIsActive,
  consoleKeyIsActive,
  createAppWithAgent,
  ensureAccount,
  ensureAgentApp,
  ensureKeyInFile,
  ensureTenant,
  issueAppKey,
  issueConsoleKey,
  setCreditPool,
} from './provision.js';
import { AgentSoulConfig, demoSoulConfig } from './soul.js';

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
const DEMO_APP_NAME = 'Demo Agent';

export async function ensureDemoData(db: Db, opts: { dataDir: string; soul?: AgentSoulConfig; creditQuota?: bigint }): Promise<DemoData> {
  const tenant = await ensureTenant(db, DEMO_TENANT_NAME);
  const tenantId = tenant.id;
  // Emails are unique across tenants; the tenant's id keeps two demo tenants (two databases' worth) apart.
  const account = await ensureAccount(db, { tenantId, email: `demo+${tenantId.slice(0, 8)}@example.com`, name: 'Demo Owner' });
  const app = await ensureAgentApp(
    db,
    { tenantId, name: DEMO_APP_NAME, description: 'An Agent App on the deterministic demo model.', createdBy: account.id },
    opts.soul ?? demoSoulConfig(),
  );
  const { key: apiKey } = await ensureKeyInFile(
    path.join(opts.dataDir, 'demo-app-key.txt'),
    (k) => appKeyIsActive(db, app.appId, k),
    () => issueAppKey(db, { tenantId, appId: app.appId, name: 'demo' }),
  );
  const { key: consoleKey } = await ensureKeyInFile(
    path.join(opts.dataDir, 'demo-console-key.txt'),
    (k) => consoleKeyIsActive(db, account.id, k),
    () => issueConsoleKey(db, { tenantId, accountId: account.id }),
  );
  await setCreditPool(db, tenantId, opts.creditQuota ?? 100_000_000n, { keepExisting: true });
  return {
    tenantId,
    accountId: account.id,
    appId: app.appId,
    agentId: app.agentId,
    configVersionId: app.configVersionId,
    apiKey,
    consoleKey,
  };
}

/**
 * A demo agent created before its hands were on by default (issue 27): when its active version and shared draft are
 * still exactly the seeded `untouched` config (nobody edited them), `withHands` is published and becomes the draft, so
 * new conversations get runtime and shell; an edited agent is left alone. True when it published.
 */
export async function enableDemoHands(db: Db, demo: DemoData, souls: { untouched: AgentSoulConfig; withHands: AgentSoulConfig }) {
  const same = (a: unknown, b: AgentSoulConfig) => {
    const parsed = AgentSoulConfig.safeParse(a);
    return parsed.success && JSON.stringify(parsed.data) === JSON.stringify(AgentSoulConfig.parse(b));
  };
  return db.$transaction(async (tx) => {
    const agent = await tx.agent.findUnique({ where: { id: demo.agentId } });
    const active = agent?.active_config_snapshot_id ? await findVersion(tx, demo.agentId, agent.active_config_snapshot_id) : null;
    const draft = await findSharedDraft(tx, demo.agentId);
    if (!active || !draft || !same(active.config_snapshot, souls.untouched) || !same(draft.config, souls.untouched)) return false;
    await updateDraft(tx, draft.id, souls.withHands);
    await publishVersion(tx, { tenantId: demo.tenantId, agentId: demo.agentId, createdBy: null, fromDraftId: draft.id }, souls.withHands);
    return true;
  });
}

/** Creates one more agent app with its own key (tests: isolation, fresh configs). */
export async function createAgentApp(
  db: Db,
  tenantId: string,
  opts: { name: string; soul?: AgentSoulConfig },
): Promise<{ appId: string; agentId: string; configVersionId: string; apiKey: string }> {
  return db.$transaction(async (tx) => {
    const ids = await createAppWithAgent(tx, { tenantId, name: opts.name, createdBy: null }, opts.soul ?? demoSoulConfig());
    return { ...ids, apiKey: await issueAppKey(tx, { tenantId, appId: ids.appId }) };
  });
}
