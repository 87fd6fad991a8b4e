/**
 * The studio's app administration (api/console/admin.ts, issue 34 item 2) on the real stack: an app's API
 * keys created (shown once), listed by prefix, revoked (then /v1 answers 401 for it), and a past version restored
 * (published again as a new version, or loaded into the shared draft); another tenant's app reads as missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_ADMIN_RESPONSES } from '../../api/openapi/console-admin.js';
import { ensureAccount, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let strangerKey: string;

beforeAll(async () => {
  stack = await startTestStack('console_admin');
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
});
afterAll(async () => stack?.stop());

const call = (path: string, method = 'GET', body?: unknown, key = stack.demo!.consoleKey) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const v1 = (key: string) => fetch(`${stack.apiUrl}/v1/parameters`, { headers: { authorization: `Bearer ${key}` } });

describe('API keys', () => {
  it('creates a key shown once, lists it by prefix, revokes it: /v1 then answers 401', async () => {
    const created = await call('/api-keys', 'POST', { name: 'ci' });
    expect(created.status).toBe(201);
    const k = (await created.json()) as { id: string; key: string; prefix: string; name: string; revoked_at: number | null };
    expect(CONSOLE_ADMIN_RESPONSES.CreatedApiKeyResponse.safeParse(k).error).toBeUndefined();
    expect(k.key.startsWith(k.prefix)).toBe(true);
    expect((await v1(k.key)).status).toBe(200);

    const list = (await (await call('/api-keys')).json()) as { data: Record<string, unknown>[]; total: number };
    expect(CONSOLE_ADMIN_RESPONSES.ApiKeyListResponse.safeParse(list).error).toBeUndefined();
    const row = list.data.find((x) => x.id === k.id)!;
    expect(row).toMatchObject({ name: 'ci', prefix: k.prefix, revoked_at: null });
    expect(JSON.stringify(list)).not.toContain(k.key);

    // Another tenant: the app is missing, the key stays.
    expect((await call(`/api-keys/${k.id}`, 'DELETE', undefined, strangerKey)).status).toBe(404);
    expect((await call('/api-keys', 'GET', undefined, strangerKey)).status).toBe(404);
    expect((await v1(k.key)).status).toBe(200);

    expect((await call(`/api-keys/${k.id}`, 'DELETE')).status).toBe(204);
    expect((await v1(k.key)).status).toBe(401);
    expect((await call(`/api-keys/${k.id}`, 'DELETE')).status).toBe(204);
    const after = (await (await call('/api-keys')).json()) as { data: { id: string; revoked_at: number | null }[] };
    expect(after.data.find((x) => x.id === k.id)!.revoked_at).toBeGreaterThan(0);
    // The seeded key is untouched.
    expect((await v1(stack.demo!.apiKey)).status).toBe(200);
    expect((await call('/api-keys/00000000-0000-4000-8000-000000000000', 'DELETE')).status).toBe(404);
  });
});

describe('version restore', () => {
  it('publishes a past version again as a new version, or loads it into the shared draft', async () => {
    const soul = (prompt: string) => {
      const s = demoSoulConfig();
      s.prompt.system_prompt = prompt;
      return s;
    };
    expect((await call('/agent/draft', 'PUT', { config: soul('Version A.') })).status).toBe(200);
    const a = (await (await call('/agent/publish', 'POST', {})).json()) as { id: string; version: number };
    expect((await call('/agent/draft', 'PUT', { config: soul('Version B.') })).status).toBe(200);
    const b = (await (await call('/agent/publish', 'POST', {})).json()) as { id: string; version: number };
    expect(b.version).toBe(a.version + 1);

    const loaded = await call(`/agent/versions/${a.id}/restore`, 'POST', { to: 'draft' });
    expect(loaded.status).toBe(200);
    const lb = await loaded.json();
    expect(CONSOLE_ADMIN_RESPONSES.RestoreVersionResponse.safeParse(lb).error).toBeUndefined();
    expect(lb).toMatchObject({ to: 'draft', restored_from: { id: a.id, version: a.version }, version: null });
    const draft = (await (await call('/agent/draft')).json()) as { config: { prompt: { system_prompt: string } } };
    expect(draft.config.prompt.system_prompt).toBe('Version A.');
    // Loading into the draft publishes nothing: B is still what turns run on.
    const agent = await stack.db.agent.findUniqueOrThrow({ where: { id: stack.demo!.agentId } });
    expect(agent.active_config_snapshot_id).toBe(b.id);

    const published = await call(`/agent/versions/${a.id}/restore`, 'POST', { to: 'publish' });
    expect(published.status).toBe(201);
    const pb = (await published.json()) as { version: { id: string; version: number } };
    expect(pb.version.version).toBe(b.version + 1);
    const active = await stack.db.agent.findUniqueOrThrow({ where: { id: stack.demo!.agentId } });
    expect(active.active_config_snapshot_id).toBe(pb.version.id);
    const v = (await (await call(`/agent/versions/${pb.version.id}`)).json()) as { config: { prompt: { system_prompt: string } } };
    expect(v.config.prompt.system_prompt).toBe('Version A.');

    expect((await call(`/agent/versions/${a.id}/restore`, 'POST', { to: 'publish' }, strangerKey)).status).toBe(404);
    expect((await call('/agent/versions/00000000-0000-4000-8000-000000000000/restore', 'POST', {})).status).toBe(404);
    expect((await call(`/agent/versions/${a.id}/restore`, 'POST', { to: 'elsewhere' })).status).toBe(400);
  });
});
