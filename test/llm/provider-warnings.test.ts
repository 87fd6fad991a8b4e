/**
 * The gateway logs and counts what the provider package says it dropped of a call (the AI SDK's `unsupported`
 * warnings): before, a setting that never reached the model left no trace anywhere an operator looks. Over real HTTP
 * (the inner LLM router, embedded PostgreSQL, a turn's signed execution context) with a scripted AI SDK model whose
 * stream-start carries a warning.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderRegistry } from '../../core/domain/llm/provider.js';
import { registries } from '../../core/platform/metrics/index.js';
import { answerParts, scriptedModel, scriptedProvider } from './fake-language-model.js';
import {
  answerOf,
  captureLogger,
  createTenant,
  invokeBody,
  post,
  readChunks,
  serveRouter,
  startTestDb,
  type Served,
  type TestDb,
} from './helpers.js';

// A feature name of this file's own: the counter is process-wide, and other files' calls must not move this series.
const DROPPED = { type: 'unsupported', feature: 'stopSequences-warnings-test', details: 'stop sequences are not supported' } as const;

let tdb: TestDb;
let api: Served;
const logs = captureLogger();
const model = scriptedModel([answerParts('Hello', [DROPPED])]);

beforeAll(async () => {
  tdb = await startTestDb();
  api = await serveRouter({ db: tdb.db, logger: logs.logger, providers: new ProviderRegistry([scriptedProvider(model)]) });
}, 120_000);
afterAll(async () => {
  await api?.close();
  await tdb?.close();
});

const counted = async () => {
  const metric = await registries.api.getSingleMetric('agent_model_warnings_total')?.get();
  return metric?.values.find((v) => v.labels.feature === DROPPED.feature)?.value ?? 0;
};

describe('a provider package’s warning about a call', () => {
  it('is a warn line with the tenant, app and message ids and the setting named, and a count by setting', async () => {
    const tenantId = await createTenant(tdb.db, { limit: 1_000_000n });
    const body = invokeBody(tenantId, { provider: 'openai', model: 'gpt-4o-mini', model_parameters: { stop_sequences: ['END'] } });
    const before = await counted();
    const res = await post(api.url, body);
    expect(res.status).toBe(200);
    expect(answerOf(await readChunks(res))).toBe('Hello');

    const lines = logs
      .text()
      .split('\n')
      .filter((l) => l.includes('dropped or changed settings'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    const messageId = (await tdb.db.message.findFirstOrThrow({ where: { tenant_id: tenantId } })).id;
    expect(lines[0]).toMatchObject({
      level: 40,
      tenant_id: tenantId,
      app_id: body.caller.app_id,
      message_id: messageId,
      agent_run_id: body.caller.agent_run_id,
      provider: 'openai',
      model: 'gpt-4o-mini',
      warnings: [DROPPED],
    });
    expect(await counted()).toBe(before + 1);
    const series = (await registries.api.getSingleMetric('agent_model_warnings_total')!.get()).values.find(
      (v) => v.labels.feature === DROPPED.feature,
    );
    expect(series?.labels).toEqual({ provider: 'openai', model: 'gpt-4o-mini', type: 'unsupported', feature: DROPPED.feature });
  });
});
