/**
 * A model call cut before its final usage chunk (a user's stop drops the connection) still counts: the
 * provider charges for the prompt and for what it generated. The gateway records the call under its
 * billing id (`invocation_id:call_index`) with token counts estimated by a real tokenizer and flagged
 * `estimated`; a replay of the same call that completes replaces the estimate with exact counts and moves
 * only the difference; a second cut of it records nothing more (issue 18 item 3).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDefaultProviders } from '../../core/domain/llm/providers/index.js';
import { countPromptTokens, countTokens } from '../../core/domain/llm/tokens.js';
import { createLogger } from '../../core/platform/logger.js';
import { createTenant, invokeBody, post, readChunks, serveRouter, startTestDb, type Served, type TestDb } from './helpers.js';

let tdb: TestDb;
let api: Served;

beforeAll(async () => {
  tdb = await startTestDb();
  const providers = createDefaultProviders({
    DEMO_MODEL_TOKEN_DELAY_MS: 5,
    OPENAI_COMPATIBLE_BASE_URL: undefined,
    OPENAI_COMPATIBLE_API_KEY: undefined,
    OPENAI_COMPATIBLE_MODEL: undefined,
  } as never);
  api = await serveRouter({ db: tdb.db, logger: createLogger('cut-call-test', 'silent'), providers });
}, 180_000);

afterAll(async () => {
  await api?.close();
  await tdb?.close();
});

/** Starts the call, reads `n` content chunks, then drops the connection (what a stopped run does). */
async function cutAfter(body: unknown, n: number): Promise<string> {
  const abort = new AbortController();
  const res = await post(api.url, body, { signal: abort.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let text = '';
  let seen = 0;
  while (seen < n) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the call ended before it was cut');
    buf += value;
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0 && seen < n) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = frame.split('\n').find((l) => l.startsWith('data:'));
      if (!data) continue;
      text += (JSON.parse(data.slice(5)) as { data: { delta: { message: { content: string } } } }).data.delta.message.content;
      seen++;
    }
  }
  abort.abort();
  return text;
}

async function ledgerRow(billingId: string, wait = true) {
  for (let i = 0; i < 100; i++) {
    const row = await tdb.db.creditLedger.findUnique({ where: { billing_request_id: billingId } });
    if (row || !wait) return row;
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

const pool = async (tenantId: string) => (await tdb.db.creditPool.findUniqueOrThrow({ where: { tenant_id: tenantId } })).quota_used;

describe('a cut model call', () => {
  it('is recorded once, estimated with the tokenizer; the completed replay replaces the estimate and pays only the difference', async () => {
    const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
    const prompt = [{ role: 'user' as const, content: '/long 400' }];
    const body = invokeBody(tenant, { prompt_messages: prompt });
    const billingId = `${body.caller.invocation_id}:0`;

    const streamed = await cutAfter(body, 20);
    const cut = await ledgerRow(billingId);
    expect(cut, 'the cut call is in the ledger').not.toBeNull();
    expect(cut!.estimated).toBe(true);
    expect(cut!.prompt_tokens).toBe(countPromptTokens(prompt));
    // What the provider generated before the cut noticed: at least what the caller received.
    expect(cut!.completion_tokens).toBeGreaterThanOrEqual(countTokens(streamed));
    expect(cut!.completion_tokens).toBeLessThan(400);
    expect(cut!.credits).toBeGreaterThan(0n);
    expect(await pool(tenant)).toBe(cut!.credits);

    // Cut again (the same billing id): nothing more is recorded or charged.
    await cutAfter(body, 5);
    await new Promise((r) => setTimeout(r, 300));
    expect(await tdb.db.creditLedger.count({ where: { billing_request_id: billingId } })).toBe(1);
    expect(await pool(tenant)).toBe(cut!.credits);

    // The same call replayed to its end: exact counts replace the estimate; the pool pays the difference once.
    const chunks = await readChunks(await post(api.url, body));
    const usage = chunks.at(-1)!.data.delta.usage!;
    expect(usage.completion_tokens).toBe(400);
    expect(usage.estimated).toBeUndefined();
    const done = (await ledgerRow(billingId, false))!;
    expect([done.estimated, done.completion_tokens]).toEqual([false, 400]);
    expect(await pool(tenant)).toBe(done.credits);
  });
});
