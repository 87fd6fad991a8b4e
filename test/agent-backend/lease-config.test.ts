/**
 * The run lease takes its configured timings (AGENT_RUN_LEASE_*, core/platform/config.ts) when no explicit options are
 * given: a backend configured with a 400 ms lease reaps a dead peer's run well before the 5 s default could.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal } from '../../core/protocol/run.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import { runRequest, startBackend, startFake, startPg } from './harness.js';

let dbUrl: string;
let fake: FakeInnerLlm;

beforeAll(async () => {
  dbUrl = (await startPg('lease_config')).url;
  fake = await startFake();
});
afterAll(async () => {
  await fake?.stop();
});

const env = { AGENT_RUN_LEASE_RENEW_MS: 100, AGENT_RUN_LEASE_TTL_MS: 400, AGENT_RUN_REAP_INTERVAL_MS: 100 };

describe('the run lease as configured', () => {
  it("fails a dead owner's run within the configured TTL plus a reap interval, not the default ~6 s", async () => {
    const a = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url, env });
    const b = await startBackend({ databaseUrl: dbUrl, apiUrl: fake.url, env });
    try {
      fake.script({ text: ['working '], hang: true });
      const { run_id } = await a.client.createRun(runRequest());
      const controller = new AbortController();
      await a.client
        .sse(run_id, { signal: controller.signal, onEvent: (e) => e.type === 'agent_message_delta' && controller.abort() })
        .catch(() => undefined);
      await a.stop({ abandonRuns: true });
      const died = Date.now();
      const t = (await b.client.untilTerminal(run_id)).find(isTerminal)!;
      expect(t.type).toBe('run_failed');
      if (t.type === 'run_failed') expect(t.data.reason).toBe('backend_restarted');
      expect(Date.now() - died).toBeLessThan(2_000);
    } finally {
      await b.stop();
    }
  }, 20_000);
});
