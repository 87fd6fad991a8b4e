/**
 * Issue 27 item 8: a config with a runtime is refused when it is saved while the api's EXECUTION_CONTEXT_SIGNING_KEY
 * is still the public default (the api would authorize none of its workspaces), naming the variable; without a
 * runtime, or with an own key, it saves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validatedSoul } from '../../api/console/agent-config-validation.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { ensureTenant } from '../../core/domain/provision.js';
import { demoSoulConfig } from '../../core/domain/soul.js';
import { freshDatabase } from '../support/db.js';

let db: Db;
let tenantId: string;

beforeAll(async () => {
  db = createDb(await freshDatabase('cfg_signing_key'));
  tenantId = (await ensureTenant(db, 'signing key tenant')).id;
});
afterAll(async () => db?.$disconnect());

const withRuntime = () => ({ ...demoSoulConfig(), runtime: { enabled: true }, shell: { enabled: true } });

describe('saving a config with a runtime on the default signing key', () => {
  it('is refused on the runtime field, naming the variable', async () => {
    const err = await validatedSoul({ db, signingKeyIsDefault: true }, { tenantId, soul: withRuntime() }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: 'invalid_agent_config' });
    expect((err as Error).message).toContain('runtime: EXECUTION_CONTEXT_SIGNING_KEY holds its public development default');
  });

  it('saves without a runtime, or with an own key', async () => {
    await expect(validatedSoul({ db, signingKeyIsDefault: true }, { tenantId, soul: demoSoulConfig() })).resolves.toBeTruthy();
    await expect(validatedSoul({ db, signingKeyIsDefault: false }, { tenantId, soul: withRuntime() })).resolves.toBeTruthy();
  });
});
