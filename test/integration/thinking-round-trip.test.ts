/**
 * Reasoning that must round-trip (issue 41 item 1), on the whole stack (api + Temporal worker + agent backend + the
 * gateway + the real AI SDK provider packages) against fakes that enforce each provider's documented rule for a
 * thinking model's tool-result turn (test/llm/providers/fake-thinking.ts): Anthropic's signed `thinking` and
 * `redacted_thinking` blocks, Gemini's `thoughtSignature` on the function call, OpenAI Responses' reasoning item with
 * its encrypted content under `store: false`. Each must come back unchanged on the second model call of the turn, on
 * the next turn (from the session snapshot), across a worker SIGKILL between the two model calls, and across an
 * ask_human pause (a new backend run from the snapshot) with a worker SIGKILL while it waits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../core/domain/seed.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import type { Stack } from '../../stack/start-stack.js';
import { THINK_ANSWER, THINKING_TEXT } from '../llm/providers/fake-thinking.js';
import { startFakeProvider, type FakeProvider } from '../llm/providers/fake-providers.js';
import { chat, FrameReader, postChat, readFrames, type ClientFrame } from '../support/sse.js';
import { killWorkerChild } from '../support/processes.js';
import { startTestStack } from '../support/stack.js';

interface Case {
  provider: 'anthropic' | 'google' | 'openai';
  model: string;
  settings: Record<string, unknown>;
  /** The reasoning metadata the fake issued with its tool calls (what the tool-result call must send back, verbatim). */
  echoed: (fake: FakeProvider) => string[];
  /** Everything it issued (Gemini also signs its final text: that comes back on the next turn). */
  issued?: (fake: FakeProvider) => string[];
}
const CASES: Case[] = [
  {
    provider: 'anthropic',
    model: 'claude-sonnet-4-20250514',
    settings: { thinking_budget: 2048, max_tokens: 4096 },
    echoed: (f) => [...f.thinking.signatures.keys(), ...f.thinking.redacted],
  },
  {
    provider: 'google',
    model: 'gemini-2.5-flash',
    settings: { thinking_budget: 1024 },
    echoed: (f) => [...f.thinking.thoughtSignatures].filter((s) => s.startsWith('TS-call-')),
    issued: (f) => [...f.thinking.thoughtSignatures],
  },
  { provider: 'openai', model: 'o4-mini', settings: { reasoning_effort: 'low' }, echoed: (f) => [...f.thinking.encrypted.values()] },
];

let stack: Stack;
const fakes = {} as Record<Case['provider'], FakeProvider>;

beforeAll(async () => {
  fakes.anthropic = await startFakeProvider('anthropic');
  fakes.google = await startFakeProvider('gemini');
  fakes.openai = await startFakeProvider('openai-responses');
  stack = await startTestStack('thinking', {
    worker: 'child',
    env: {
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      ANTHROPIC_API_KEY: 'sk-ant-thinking-0123456789',
      ANTHROPIC_BASE_URL: `${fakes.anthropic.url}/v1`,
      GOOGLE_GENERATIVE_AI_API_KEY: 'AIza-thinking-0123456789',
      GOOGLE_BASE_URL: `${fakes.google.url}/v1beta`,
      OPENAI_API_KEY: 'sk-openai-thinking-0123456789',
      OPENAI_BASE_URL: `${fakes.openai.url}/v1`,
    },
  });
}, 240_000);
afterAll(async () => {
  await stack?.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});

async function agentOn(c: Case, extra: Record<string, unknown> = {}) {
  const soul = AgentSoulConfig.parse({
    prompt: { system_prompt: 'Think, then use your tools.' },
    model: { provider: c.provider, model: c.model, model_settings: c.settings },
    tools: { core: ['calculator'] },
    ...extra,
  });
  return createAgentApp(stack.db, stack.demo!.tenantId, { name: `Thinking on ${c.provider}`, soul });
}

/** What the fake issued since `before` (a list it returned earlier): with its calls, or (`all`) anywhere. */
const issuedSince = (c: Case, fake: FakeProvider, before: string[], all = false) =>
  (all ? (c.issued ?? c.echoed) : c.echoed)(fake).filter((v) => !before.includes(v));

const answerOf = (frames: ClientFrame[]) => frames.find((f) => f.event === 'message')?.data.answer;
const failureOf = (frames: ClientFrame[], fake: FakeProvider) =>
  JSON.stringify({ error: frames.find((f) => f.event === 'error')?.data, refusals: fake.thinking.refusals });

describe.each(CASES)('thinking + a tool call on $provider', (c) => {
  it('the tool-result call sends the reasoning back as issued, and the next turn sends it again from the session snapshot', async () => {
    const fake = fakes[c.provider];
    const app = await agentOn(c);
    const before = fake.requests.length;
    const issuedBefore = (c.issued ?? c.echoed)(fake);
    const first = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:think What is 6*7?', user: `think-${c.provider}` });
    expect(first.status).toBe(200);
    expect(answerOf(first.frames), failureOf(first.frames, fake)).toBe(THINK_ANSWER);
    // The thinking was streamed and recorded like any reasoning.
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const thoughts = first.frames.filter((f) => f.event === 'agent_thought').map((f) => String(f.data.thought ?? ''));
    expect(thoughts.join(' ')).toContain(THINKING_TEXT);
    // Two model calls; the second carried every signature the first one issued, byte for byte.
    const sent = fake.requests.slice(before);
    expect(sent).toHaveLength(2);
    const echoed = issuedSince(c, fake, issuedBefore);
    expect(echoed.length).toBeGreaterThan(0);
    for (const value of echoed) expect(sent[1]!.body).toContain(JSON.stringify(value));

    // The snapshot holds them (what survives any process): the next turn starts from it.
    const turn1 = issuedSince(c, fake, issuedBefore, true);
    const binding = await stack.db.agentWorkspaceBinding.findFirstOrThrow({ where: { owner_id: conversationId } });
    const snapshot = JSON.stringify(binding.session_snapshot);
    for (const value of turn1) expect(snapshot).toContain(JSON.stringify(value));
    const second = await chat(stack.apiUrl, app.apiKey, {
      query: 'SCN:think And again?',
      conversation_id: conversationId,
      user: `think-${c.provider}`,
    });
    expect(answerOf(second.frames), failureOf(second.frames, fake)).toBe(THINK_ANSWER);
    // Turn 2's first call carried turn 1's reasoning (the fake checks every signature it gets back).
    expect(fake.requests.length - before).toBe(4);
    for (const value of turn1) expect(fake.requests[before + 2]!.body).toContain(JSON.stringify(value));
    expect(fake.thinking.refusals).toEqual([]);
  }, 120_000);
});

describe('across a worker SIGKILL', () => {
  it.each(CASES)(
    'between the two model calls of a turn on $provider: the turn completes and the held call had the reasoning',
    async (c) => {
      const fake = fakes[c.provider];
      const app = await agentOn(c);
      const issuedBefore = c.echoed(fake);
      const firstCall = fake.pauseNext();
      const res = await postChat(stack.apiUrl, app.apiKey, { query: 'SCN:think What is 6*7?', user: `think-kill-${c.provider}` });
      expect(res.status).toBe(200);
      const reader = new FrameReader(res);
      await firstCall.arrived;
      const secondCall = fake.pauseNext();
      firstCall.release();
      // The calculator's result is recorded; the second model call is in flight, held by the fake.
      const head = await reader.read((f) => f.event === 'agent_thought' && String(f.data.observation ?? '') !== '');
      const held = await secondCall.arrived;
      await killWorkerChild(stack);
      await stack.startWorkerChild();
      secondCall.release();
      const frames = [...head, ...(await reader.read())];
      expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_, i) => i + 1));
      expect(answerOf(frames), failureOf(frames, fake)).toBe(THINK_ANSWER);
      expect(frames.filter((f) => f.event === 'message_end')).toHaveLength(1);
      // Every signature / encrypted item the first call issued was in the call the fake held across the kill.
      const issued = issuedSince(c, fake, issuedBefore);
      expect(issued.length).toBeGreaterThan(0);
      for (const value of issued) expect(held.body).toContain(JSON.stringify(value));
      expect(fake.thinking.refusals).toEqual([]);
    },
    180_000,
  );

  it('an ask_human pause (a worker SIGKILL while it waits): the continuation, a new backend run from the snapshot, sends the reasoning back', async () => {
    for (const c of CASES) {
      const fake = fakes[c.provider];
      const app = await agentOn(c, { ask_human: { enabled: true } });
      const user = `think-ask-${c.provider}`;
      const issuedBefore = c.echoed(fake);
      const { frames } = await chat(stack.apiUrl, app.apiKey, { query: 'SCN:thinkask Multiply 6 by what?', user });
      const hir = frames.find((f) => f.event === 'human_input_required');
      expect(hir, failureOf(frames, fake)).toBeDefined();
      const token = (hir!.data.data as { form_token: string }).form_token;
      const issued = issuedSince(c, fake, issuedBefore);
      expect(issued.length).toBeGreaterThan(0);

      // One SIGKILL while a form waits is enough to show the pause keeps nothing in a process (restarts are slow here).
      if (c.provider === 'anthropic') {
        await killWorkerChild(stack);
        await stack.startWorkerChild();
      }

      const before = fake.requests.length;
      const submit = await fetch(`${stack.apiUrl}/v1/form/human_input/${token}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${app.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: { answer: '7' }, action: 'submit', user }),
      });
      expect(submit.status).toBe(200);
      const { task_id } = (await submit.json()) as { task_id: string };
      const attach = await fetch(`${stack.apiUrl}/v1/chat-messages/${task_id}/events?user=${user}`, {
        headers: { authorization: `Bearer ${app.apiKey}` },
      });
      const resumed = await readFrames(attach);
      expect(answerOf(resumed), failureOf(resumed, fake)).toBe(THINK_ANSWER);
      const continuation = fake.requests.slice(before);
      expect(continuation).toHaveLength(1);
      for (const value of issued) expect(continuation[0]!.body).toContain(JSON.stringify(value));
    }
    expect(Object.values(fakes).flatMap((f) => f.thinking.refusals)).toEqual([]);
  }, 240_000);
});
