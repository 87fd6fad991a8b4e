/**
 * Durability of a turn: the worker is SIGKILLed mid-stream (five times in a row) and the turn still
 * completes with no duplicated or missing events, answer text, thought rows or usage; two racing messages
 * in one conversation get exactly one turn; tool calls become thought rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, readFrames, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { killWorkerChild } from '../support/processes.js';
import { backendRunsOf } from '../support/sql.js';

let stack: Stack;
let key: string;

beforeAll(async () => {
  stack = await startTestStack('durability', { worker: 'child', env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

function assertCleanStream(frames: ClientFrame[]) {
  expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_, i) => i + 1));
  expect(frames.filter((f) => f.event === 'message')).toHaveLength(1);
  expect(frames.filter((f) => f.event === 'message_end')).toHaveLength(1);
  const deltas = frames
    .filter((f) => f.event === 'agent_message')
    .map((f) => f.data.answer as string)
    .join('');
  expect(frames.find((f) => f.event === 'message')!.data.answer).toBe(deltas);
  return deltas;
}

describe('a worker killed mid-turn', () => {
  // Odd rounds kill after a tool call was recorded; even rounds kill in the middle of streamed answer text.
  for (let round = 1; round <= 5; round++) {
    const withTool = round % 2 === 1;
    it(`round ${round}: the turn completes exactly once after SIGKILL of the worker (${withTool ? 'after a tool call' : 'mid-text'})`, async () => {
      const query = withTool ? '/slow 25 /calc 6*7' : '/slow 30 /long 120';
      const res = await postChat(stack.apiUrl, key, { query, user: `kill-${round}` });
      expect(res.status).toBe(200);
      const reader = new FrameReader(res);
      let deltas = 0;
      const head = await reader.read((f) =>
        withTool ? f.event === 'agent_thought' && String(f.data.observation ?? '') !== '' : f.event === 'agent_message' && ++deltas === 3,
      );
      await killWorkerChild(stack);
      await stack.startWorkerChild();
      const tail = await reader.read();
      const frames = [...head, ...tail];
      const answer = assertCleanStream(frames);
      const messageId = frames.at(-1)!.data.message_id as string;

      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
      expect(msg.status).toBe('succeeded');
      expect(msg.answer).toBe(answer);
      const thoughts = await stack.db.messageAgentThought.findMany({ where: { message_id: messageId }, orderBy: { position: 'asc' } });
      if (withTool) {
        expect(answer).toContain('42');
        expect(thoughts.map((t) => [t.position, t.tool, JSON.parse(t.observation).result])).toEqual([[1, 'calculator', 42]]);
      } else {
        expect(answer.trim().split(/\s+/)).toHaveLength(120);
        expect(thoughts).toEqual([]);
      }
      const events = await stack.db.messageEvent.findMany({ where: { message_id: messageId }, orderBy: { seq: 'asc' } });
      expect(events.map((e) => e.seq)).toEqual(frames.map((f) => Number(f.id)));

      // One backend run, and each model call billed once: usage equals the ledger.
      const run = await stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
      expect(await backendRunsOf(stack.databaseUrl, messageId)).toBe(1);
      const ledger = await stack.db.creditLedger.findMany({ where: { agent_run_id: run.backend_run_id! } });
      expect(new Set(ledger.map((l) => l.billing_request_id)).size).toBe(ledger.length);
      expect(ledger.length).toBe(withTool ? 2 : 1);
      const billed = ledger.reduce((n, l) => n + l.prompt_tokens + l.completion_tokens, 0);
      expect(msg.total_tokens).toBe(billed);
    }, 120_000);
  }
});

describe('one in-flight turn per conversation', () => {
  it('two racing messages: exactly one wins, the other gets 409 conversation_busy', async () => {
    const first = await chat(stack.apiUrl, key, { query: 'hello', user: 'racer' });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const [a, b] = await Promise.all([
      postChat(stack.apiUrl, key, { query: '/slow 20 /long 20', user: 'racer', conversation_id: conversationId }),
      postChat(stack.apiUrl, key, { query: '/slow 20 /long 20', user: 'racer', conversation_id: conversationId }),
    ]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    const loser = a.status === 409 ? a : b;
    expect(await loser.json()).toMatchObject({ code: 'conversation_busy', status: 409 });
    const winner = a.status === 200 ? a : b;
    const frames = await readFrames(winner);
    expect(frames.at(-1)!.event).toBe('message_end');
    const count = await stack.db.message.count({ where: { conversation_id: conversationId } });
    expect(count).toBe(2);
  });
});

describe('thought recording', () => {
  it('records a tool call as one thought row and publishes its full state as agent_thought events', async () => {
    const { frames } = await chat(stack.apiUrl, key, { query: '/calc 6*7', user: 'thinker' });
    const thoughts = frames.filter((f) => f.event === 'agent_thought');
    expect(thoughts.length).toBeGreaterThanOrEqual(1);
    const last = thoughts.at(-1)!.data;
    expect(last).toMatchObject({ position: 1, tool: 'calculator' });
    expect(JSON.parse(last.observation as string)).toMatchObject({ result: 42 });
    expect(JSON.parse(last.tool_input as string)).toEqual({ expression: '6*7' });
    expect(new Set(thoughts.map((t) => t.data.id)).size).toBe(1);
    expect(frames.find((f) => f.event === 'message')!.data.answer).toContain('The calculator says 42.');
  });
});
