/**
 * What the agent backend does with the model facts the api resolves into the llm layer (issue 29): each call's
 * prompt fitted into the model's context window (the oldest turns left out, the system prompt and newest turns
 * whole, room left for the answer; visible as `history_trimmed` on model_response), a cut call priced with the
 * tenant's prices from the layer, and the reasoning settings (thinking_budget, reasoning_effort) forwarded to
 * the gateway. Over HTTP against the scripted inner LLM (fake-inner-llm.ts).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { priceUsage } from '../../core/domain/llm/pricing.js';
import { countPromptTokens } from '../../core/domain/llm/tokens.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import { isTerminal, type RunEvent } from '../../core/protocol/run.js';
import { fitToContextWindow, outputReserve, TOKENIZER_MARGIN } from '../../agent-backend/modules/history.js';
import type { FakeInnerLlm } from './fake-inner-llm.js';
import { aiEvents, runRequest, startBackend, startFake, startPg, textOf, type TestBackend } from './harness.js';

let pg: { stop: () => Promise<void> };
let fake: FakeInnerLlm;
let backend: TestBackend;

beforeAll(async () => {
  const db = await startPg('model_fit');
  pg = db.pg;
  fake = await startFake();
  backend = await startBackend({ databaseUrl: db.url, apiUrl: fake.url });
}, 120_000);
afterAll(async () => {
  await backend?.stop();
  await fake?.stop();
  await pg?.stop();
});
beforeEach(() => fake.reset());

function terminal(events: RunEvent[]) {
  const t = events.filter(isTerminal);
  expect(t).toHaveLength(1);
  return t[0]!;
}

/** A query of ~300 tokens, told apart by its number. */
const longQuery = (i: number) => `question-${i}: ` + Array.from({ length: 150 }, (_, k) => `word${(k * 7 + i) % 97}`).join(' ');

describe('fitToContextWindow', () => {
  const turn = (i: number): PromptMessage[] => [
    { role: 'user', content: longQuery(i) },
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'calculator', arguments: '{"expression":"1+1"}' } }],
    },
    { role: 'tool', tool_call_id: `c${i}`, name: 'calculator', content: '2' },
    { role: 'assistant', content: `answer ${i}` },
  ];
  const messages = [0, 1, 2, 3, 4, 5].flatMap(turn);

  it('drops whole turns, oldest first, never a tool result without its call; what it keeps fits the budget', () => {
    const limits = { contextWindow: 2_000, maxTokens: 300 };
    const fit = fitToContextWindow('Be brief.', messages, limits);
    expect(fit.budget_tokens).toBe(Math.floor((2_000 - 300) * TOKENIZER_MARGIN));
    expect(fit.dropped_messages).toBeGreaterThan(0);
    expect(fit.messages).toEqual(messages.slice(fit.dropped_messages));
    expect(fit.messages[0]!.role).toBe('user');
    expect(fit.dropped_turns * 4).toBe(fit.dropped_messages);
    expect(fit.prompt_tokens).toBe(countPromptTokens([{ role: 'system', content: 'Be brief.' }, ...fit.messages]));
    expect(fit.prompt_tokens).toBeLessThanOrEqual(fit.budget_tokens);
    // One more turn would not have fit.
    const oneMore = messages.slice(fit.dropped_messages - 4);
    expect(countPromptTokens([{ role: 'system', content: 'Be brief.' }, ...oneMore])).toBeGreaterThan(fit.budget_tokens);
  });

  it('keeps everything that fits, and the newest turn even when it alone does not', () => {
    expect(fitToContextWindow(null, messages, { contextWindow: 1_000_000 })).toMatchObject({ messages, dropped_messages: 0 });
    const tiny = fitToContextWindow(null, messages, { contextWindow: 500, maxTokens: 100 });
    expect(tiny.messages).toEqual(turn(5));
    expect(tiny.dropped_turns).toBe(5);
  });

  it('reserves max_tokens, else the model’s max output up to a quarter of the window', () => {
    expect(outputReserve({ contextWindow: 10_000, maxTokens: 700 })).toBe(700);
    expect(outputReserve({ contextWindow: 10_000, maxOutput: 1_000 })).toBe(1_000);
    expect(outputReserve({ contextWindow: 10_000, maxOutput: 8_000 })).toBe(2_500);
  });
});

describe('a long conversation on a small context window', () => {
  it('sends every turn, leaving out the oldest turns as the conversation outgrows the window', async () => {
    const llm = { context_window: 2_500, max_output: 400 };
    let snapshot: unknown;
    const sent: PromptMessage[][] = [];
    const trimmed: unknown[] = [];
    for (let i = 0; i < 10; i++) {
      fake.script({ text: [`answer ${i}`], usage: { prompt_tokens: 10, completion_tokens: 2 } });
      const { run_id } = await backend.client.createRun(
        runRequest({ query: longQuery(i), llm, ...(snapshot ? { session_snapshot: snapshot } : {}) }),
      );
      const events = await backend.client.untilTerminal(run_id);
      const t = terminal(events);
      if (t.type !== 'run_succeeded') throw new Error(`turn ${i}: ${t.type} ${JSON.stringify(t.data)}`);
      snapshot = t.data.session_snapshot;
      sent.push(fake.calls.at(-1)!.body.target.prompt_messages);
      trimmed.push(aiEvents(events, 'model_response')[0]?.history_trimmed);
    }
    // No max_tokens: the model's max output is kept free for the answer.
    const budget = Math.floor((2_500 - outputReserve({ contextWindow: 2_500, maxOutput: 400 })) * TOKENIZER_MARGIN);
    for (const [i, prompt] of sent.entries()) {
      expect(countPromptTokens(prompt), `turn ${i} fits`).toBeLessThanOrEqual(budget);
      expect(prompt[0]).toEqual({ role: 'system', content: 'You are a helpful agent.' });
      expect(prompt.at(-1)).toEqual({ role: 'user', content: longQuery(i) });
      // Whole turns: after the system prompt, a user message starts what was kept.
      expect(prompt[1]!.role).toBe('user');
    }
    // Early turns went whole; the last ones left the first questions out, and said so.
    expect(trimmed[0]).toBeUndefined();
    expect(sent[9]!.some((m) => m.content === longQuery(0))).toBe(false);
    expect(sent[9]!.some((m) => m.content === longQuery(8))).toBe(true);
    expect(trimmed[9]).toMatchObject({ context_window: 2_500, budget_tokens: budget });
    const last = trimmed[9] as { dropped_messages: number; dropped_turns: number; prompt_tokens: number };
    expect(last.dropped_messages).toBe(2 * last.dropped_turns);
    expect(last.prompt_tokens).toBe(countPromptTokens(sent[9]!));
    // The snapshot keeps the whole conversation (a bigger model later sees it all).
    const history = (snapshot as { layers: { name: string; runtime_state: { messages: unknown[] } }[] }).layers.find(
      (l) => l.name === 'history',
    )!;
    expect(history.runtime_state.messages).toHaveLength(20);
  });
});

describe('the llm layer’s prices and reasoning settings', () => {
  it('prices a call cut by a stop with the tenant’s prices from the layer, not the built-in ones', async () => {
    const prices = { input: '7', output: '13', currency: 'USD' };
    fake.script({ text: Array.from({ length: 200 }, (_, i) => `t${i} `), delayMs: 20 });
    const { run_id } = await backend.client.createRun(runRequest({ llm: { prices } }));
    let cancel: Promise<Response> | null = null;
    const { events } = await backend.client.sse(run_id, {
      onEvent: (e) => {
        if (e.type === 'agent_message_delta' && !cancel) cancel = backend.client.cancel(run_id, { reason: 'user_stop' });
      },
    });
    await cancel;
    const t = terminal(events);
    if (t.type !== 'run_cancelled') throw new Error(t.type);
    const usage = t.data.usage!;
    expect(textOf(events).length).toBeGreaterThan(0);
    expect(usage.estimated).toBe(true);
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect([usage.prompt_unit_price, usage.completion_unit_price]).toEqual(['7', '13']);
    const expected = priceUsage({ prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens }, prices);
    // The same decimal (the run's sum drops trailing zeros).
    expect(Number(usage.total_price)).toBe(Number(expected.usage.total_price));
    expect(Number(usage.total_price)).toBeGreaterThan(0);
  });

  it('forwards thinking_budget and reasoning_effort to the gateway as model parameters', async () => {
    fake.script({ text: ['ok'] });
    const { run_id } = await backend.client.createRun(
      runRequest({ modelSettings: { max_tokens: 4_000, thinking_budget: 2_048, reasoning_effort: 'high' } }),
    );
    expect(terminal(await backend.client.untilTerminal(run_id)).type).toBe('run_succeeded');
    expect(fake.calls[0]!.body.target.model_parameters).toEqual({ max_tokens: 4_000, thinking_budget: 2_048, reasoning_effort: 'high' });
  });
});
