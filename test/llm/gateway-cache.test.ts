/**
 * The gateway cache against real PostgreSQL (core/domain/llm/gateway-cache.ts, docs/decisions/0013-gateway-cache.md):
 * the router of one "replica" caches a tenant's credentials and pool verdict; another writer (a second database
 * client, as another api replica's console would be) changes them, the triggers NOTIFY gateway_cache, and the next call
 * after the notification arrived uses the new state. Waits on the notification itself, never on time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptJson, parseEncryptionKey, saveCredentials } from '../../core/domain/llm/credentials.js';
import { GATEWAY_CACHE_CHANNEL } from '../../core/domain/llm/gateway-cache.js';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { EventNotifier } from '../../core/protocol/event-log.js';
import { startFakeOpenAi, type FakeOpenAi } from './fake-openai.js';
import {
  captureLogger,
  createTenant,
  ENCRYPTION_KEY,
  invokeBody,
  post,
  readChunks,
  serveRouter,
  startTestDb,
  type Served,
  type TestDb,
} from './helpers.js';

const SYSTEM_KEY = 'sk-system-0123456789';
const PROVIDER = 'openai_compatible';

let tdb: TestDb;
let other: Db; // "another replica": its own connections to the same database
let fake: FakeOpenAi;
let notifier: EventNotifier;
let api: Served;

beforeAll(async () => {
  [tdb, fake] = await Promise.all([startTestDb(), startFakeOpenAi()]);
  other = createDb(tdb.url);
  notifier = new EventNotifier(tdb.url);
  await notifier.start();
  const providers = createDefaultProviders({
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: `${fake.url}/v1`,
    OPENAI_COMPATIBLE_API_KEY: SYSTEM_KEY,
    OPENAI_COMPATIBLE_MODEL: 'fake-ok',
  });
  api = await serveRouter({ db: tdb.db, logger: captureLogger().logger, providers, notifier });
  await until(() => notifier.listensTo(GATEWAY_CACHE_CHANNEL));
}, 180_000);

afterAll(async () => {
  await api?.close();
  await notifier?.stop();
  await other?.$disconnect();
  await fake?.close();
  await tdb?.close();
});

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10));
}

/** Resolves once a gateway_cache notification with `payload` reached this process (the router's cache ran before). */
function notified(payload: string): Promise<void> {
  return new Promise((resolve) => {
    const off = notifier.onChannel(GATEWAY_CACHE_CHANNEL, (p) => {
      if (p !== payload) return;
      off();
      resolve();
    });
  });
}

/** One call of the tenant's open-provider model; the Authorization the fake provider saw. */
async function callAuth(tenant: string): Promise<string | undefined> {
  const res = await post(api.url, invokeBody(tenant, { provider: PROVIDER, model: 'fake-ok' }));
  expect(res.status).toBe(200);
  await readChunks(res);
  return fake.requests[fake.requests.length - 1]!.authorization;
}

const encrypted = (apiKey: string) => encryptJson(parseEncryptionKey(ENCRYPTION_KEY), { base_url: `${fake.url}/v1`, api_key: apiKey });

describe('gateway cache invalidation across replicas', () => {
  it("another replica's credential update is used by the next call after its NOTIFY", async () => {
    const tenant = await createTenant(tdb.db);
    await saveCredentials(tdb.db, ENCRYPTION_KEY, tenant, PROVIDER, { base_url: `${fake.url}/v1`, api_key: 'sk-one' });
    expect(await callAuth(tenant)).toBe('Bearer sk-one');
    expect(await callAuth(tenant)).toBe('Bearer sk-one');

    const seen = notified(`c:${tenant}:${PROVIDER}`);
    await other.$executeRaw`update model_provider_credentials set encrypted_config = ${encrypted('sk-two')}
                             where tenant_id = ${tenant}::uuid and provider = ${PROVIDER}`;
    await seen;
    expect(await callAuth(tenant)).toBe('Bearer sk-two');
  });

  it('keeps serving the cached credentials until a NOTIFY names them (a write without one is not seen)', async () => {
    const tenant = await createTenant(tdb.db);
    // The save's own NOTIFY comes back after the save (and drops what was read meanwhile): wait for it first.
    const saved = notified(`c:${tenant}:${PROVIDER}`);
    await saveCredentials(tdb.db, ENCRYPTION_KEY, tenant, PROVIDER, { base_url: `${fake.url}/v1`, api_key: 'sk-cached' });
    await saved;
    expect(await callAuth(tenant)).toBe('Bearer sk-cached');
    // The row changes with the triggers off (replica role): nothing is sent, so the cache still holds the old value.
    await other.$transaction([
      other.$executeRaw`set local session_replication_role = replica`,
      other.$executeRaw`update model_provider_credentials set encrypted_config = ${encrypted('sk-silent')}
                         where tenant_id = ${tenant}::uuid and provider = ${PROVIDER}`,
    ]);
    expect(await callAuth(tenant)).toBe('Bearer sk-cached');
    // An explicit notify (what a writer without the trigger would send) drops it.
    const seen = notified(`c:${tenant}:${PROVIDER}`);
    await other.$executeRaw`select pg_notify('gateway_cache', ${`c:${tenant}:${PROVIDER}`})`;
    await seen;
    expect(await callAuth(tenant)).toBe('Bearer sk-silent');
  });

  it("another replica's delete makes the next call system-hosted", async () => {
    const tenant = await createTenant(tdb.db);
    await saveCredentials(tdb.db, ENCRYPTION_KEY, tenant, PROVIDER, { base_url: `${fake.url}/v1`, api_key: 'sk-gone' });
    expect(await callAuth(tenant)).toBe('Bearer sk-gone');
    const seen = notified(`c:${tenant}:${PROVIDER}`);
    await other.modelProviderCredential.deleteMany({ where: { tenant_id: tenant, provider: PROVIDER } });
    await seen;
    expect(await callAuth(tenant)).toBe(`Bearer ${SYSTEM_KEY}`);
  });

  it('a pool used up elsewhere refuses the next call; a raised limit admits again', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    expect((await post(api.url, invokeBody(tenant))).status).toBe(200);
    expect((await post(api.url, invokeBody(tenant))).status).toBe(200);

    let seen = notified(`p:${tenant}`);
    await other.$executeRaw`update credit_pools set quota_used = quota_limit where tenant_id = ${tenant}::uuid`;
    await seen;
    expect((await post(api.url, invokeBody(tenant))).status).toBe(429);

    seen = notified(`p:${tenant}`);
    await other.$executeRaw`update credit_pools set quota_limit = quota_limit * 2 where tenant_id = ${tenant}::uuid`;
    await seen;
    const res = await post(api.url, invokeBody(tenant));
    expect(res.status).toBe(200);
    await readChunks(res);
  });

  it('a pool this process used up refuses the next call at once, and a replay is still served, billed once', async () => {
    const tenant = await createTenant(tdb.db, { limit: 10n });
    const body = invokeBody(tenant);
    await readChunks(await post(api.url, body));
    expect((await post(api.url, invokeBody(tenant))).status).toBe(429);
    const replay = await post(api.url, body);
    expect(replay.status).toBe(200);
    await readChunks(replay);
    const rows = await tdb.db.creditLedger.findMany({ where: { billing_request_id: `${body.caller.invocation_id}:0` } });
    expect(rows).toHaveLength(1);
    const pool = await tdb.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenant } });
    expect(pool.quota_used).toBe(rows[0]!.credits);
  });

  it('an increment that leaves the verdict as it was sends no notification', async () => {
    const tenant = await createTenant(tdb.db, { limit: 1_000_000n });
    // The pool's creation notifies too, and may reach this listener after the capture below starts (a CI run saw it):
    // wait for a marker sent after it first (notifications reach a listener in commit order).
    const created = notified('created');
    await other.$executeRaw`select pg_notify('gateway_cache', 'created')`;
    await created;
    const payloads: (string | undefined)[] = [];
    const off = notifier.onChannel(GATEWAY_CACHE_CHANNEL, (p) => payloads.push(p));
    await other.$executeRaw`update credit_pools set quota_used = quota_used + 5 where tenant_id = ${tenant}::uuid`;
    // A marker sent after the update arrives after anything the update sent (one session's notifications keep their order).
    const marker = notified('marker');
    await other.$executeRaw`select pg_notify('gateway_cache', 'marker')`;
    await marker;
    off();
    expect(payloads.filter((p) => p === `p:${tenant}`)).toEqual([]);
  });
});
