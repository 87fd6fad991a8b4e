/**
 * runAgent paths no other test reached (issue 18 items 4, 9, 10): what a terminal does to the stored
 * session snapshot, the stop fallback when the backend never confirms, thought frames sent once, and what
 * a pause answers. MockActivityEnvironment + real PostgreSQL + scripted backend (run-agent-harness.ts).
 */
import { ActivityCancellationDetails, CancelledFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import type { SessionSnapshot } from '../../core/protocol/run.js';
import { freshDatabase } from '../support/db.js';
import { attempt, committed, preparedTurn, ScriptedBackend, usage } from './run-agent-harness.js';

let db: Db;
const config = loadConfig({}, { DELTA_DEBOUNCE_MS: 20, STOP_WAIT_MS: 1500 });
const logger = createLogger('run-agent-paths', 'silent');
const deps = () => ({ db, config, logger });
const OLD: SessionSnapshot = {
  schema_version: 1,
  layers: [{ name: 'history', lifecycle_state: 'suspended', runtime_state: { messages: ['old'] } }],
};
const NEW: SessionSnapshot = {
  schema_version: 1,
  layers: [{ name: 'history', lifecycle_state: 'suspended', runtime_state: { messages: ['old', 'new'] } }],
};

beforeAll(async () => {
  db = createDb(await freshDatabase('run_agent_paths'));
});
afterAll(async () => {
  await db?.$disconnect();
});

const events = (messageId: string) => db.messageEvent.findMany({ where: { message_id: messageId }, orderBy: { seq: 'asc' } });
const snapshotOf = async (bindingId: string) =>
  (await db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: bindingId } })).session_snapshot;

describe('runAgent: the session snapshot a terminal leaves (docs/seeds/001)', () => {
  it('a failed run without a snapshot leaves the previous one untouched', async () => {
    const backend = new ScriptedBackend();
    const { messageId, bindingId } = await preparedTurn(db, { snapshot: OLD });
    const outcome = attempt(deps(), backend).run(messageId);
    backend.fail({ error: 'boom', reason: 'internal_error', session_snapshot: null, usage: null });
    await expect(outcome).resolves.toMatchObject({ status: 'failed' });
    expect(await snapshotOf(bindingId!)).toEqual(OLD);
  });

  it("a failed run's snapshot is stored", async () => {
    const backend = new ScriptedBackend();
    const { messageId, bindingId } = await preparedTurn(db, { snapshot: OLD });
    const outcome = attempt(deps(), backend).run(messageId);
    backend.fail({ error: 'boom', reason: 'internal_error', session_snapshot: NEW, usage: usage(3) });
    await expect(outcome).resolves.toMatchObject({ status: 'failed' });
    expect(await snapshotOf(bindingId!)).toEqual(NEW);
    expect((await db.message.findUniqueOrThrow({ where: { id: messageId } })).answer_tokens).toBe(3);
  });
});

describe('runAgent: usage from the ledger when the terminal has none (issue 30)', () => {
  const bill = (tenantId: string, runId: string, callIndex: number, prompt: number, completion: number, price: string) =>
    db.creditLedger.create({
      data: {
        tenant_id: tenantId,
        billing_request_id: `${runId}:${callIndex}`,
        agent_run_id: runId,
        provider: 'demo',
        model: 'demo-chat',
        prompt_tokens: prompt,
        completion_tokens: completion,
        credits: BigInt(prompt + 2 * completion),
        total_price: price,
        currency: 'USD',
        billable: true,
        estimated: callIndex === 1,
      },
    });

  it("a run failed without usage (the reaper's backend_restarted) gets its ledger rows, on the message and the error event", async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn(db);
    const msg0 = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    await bill(msg0.tenant_id, backend.runId, 0, 30, 10, '0.0000500');
    await bill(msg0.tenant_id, backend.runId, 1, 40, 5, '0.0000500');
    const outcome = attempt(deps(), backend).run(messageId);
    backend.fail({ error: 'gone', error_type: null, reason: 'backend_restarted', session_snapshot: null, usage: null });
    await expect(outcome).resolves.toMatchObject({ status: 'failed' });
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.message_tokens, msg.answer_tokens, msg.total_tokens, msg.total_price.toString()]).toEqual([70, 15, 85, '0.0001']);
    expect(msg.usage).toMatchObject({ total_tokens: 85, total_price: '0.0001000', model_requests: 2, estimated: true });
    const error = (await events(messageId)).find((e) => e.event === 'error')!;
    expect((error.data as { metadata: { usage: unknown } }).metadata.usage).toEqual(msg.usage);
  });

  it('a stop the backend never confirms ends with the ledger figures in message_end', async () => {
    const backend = new ScriptedBackend();
    backend.confirmsCancel = false;
    const { messageId } = await preparedTurn(db);
    const msg0 = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    await bill(msg0.tenant_id, backend.runId, 0, 12, 3, '0.0000180');
    const a = attempt(deps(), backend);
    const outcome = a.run(messageId);
    backend.delta('partial');
    await committed(a.env, '2');
    a.env.cancel('CANCELLED', new ActivityCancellationDetails({ cancelRequested: true }));
    await expect(outcome).rejects.toBeInstanceOf(CancelledFailure);
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.total_tokens]).toEqual(['stopped', 15]);
    const end = (await events(messageId)).find((e) => e.event === 'message_end')!;
    expect((end.data as { metadata: { usage: { total_tokens: number } } }).metadata.usage.total_tokens).toBe(15);
  });
});

describe('runAgent: what a failure keeps (issue 18 item 6)', () => {
  it("keeps the backend's raw error_type, reason, error and run id beside the client's code and message", async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn(db);
    const outcome = attempt(deps(), backend).run(messageId);
    backend.fail({ error: 'workspace ws-9 is gone', error_type: null, reason: 'binding_lost', session_snapshot: null, usage: null });
    await expect(outcome).resolves.toEqual({ status: 'failed', errorCode: 'completion_request_error' });
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.error_code, msg.error]).toEqual([
      'completion_request_error',
      'The retained agent working environment is no longer available.',
    ]);
    expect((msg.metadata as { agent_failure: unknown }).agent_failure).toEqual({
      error_type: null,
      reason: 'binding_lost',
      error: 'workspace ws-9 is gone',
      backend_run_id: backend.runId,
    });
    const error = (await events(messageId)).find((e) => e.event === 'error')!;
    expect(error.data).toMatchObject({
      code: 'completion_request_error',
      message: 'The retained agent working environment is no longer available.',
    });
  });
});

describe('runAgent: a stop the backend never confirms (STOP_WAIT_MS)', () => {
  it('ends the turn stopped with what was streamed, once the wait is over, and leaves the snapshot alone', async () => {
    const backend = new ScriptedBackend();
    backend.confirmsCancel = false;
    const { messageId, bindingId, conversationId } = await preparedTurn(db, { snapshot: OLD });
    const a = attempt(deps(), backend);
    const outcome = a.run(messageId);
    backend.delta('Half an ');
    await committed(a.env, '2');
    a.env.cancel('CANCELLED', new ActivityCancellationDetails({ cancelRequested: true }));

    await expect(outcome).rejects.toBeInstanceOf(CancelledFailure);
    expect(backend.cancels).toHaveLength(1);
    const run = await db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    expect(run.terminal_type).toBe('stop_timeout');
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.answer]).toEqual(['stopped', 'Half an ']);
    expect((await events(messageId)).slice(-2).map((e) => e.event)).toEqual(['message', 'message_end']);
    expect(await snapshotOf(bindingId!)).toEqual(OLD);
    expect((await db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id).toBeNull();
  });
});

describe('runAgent: thought frames', () => {
  it('an event that leaves a thought row as it was sends no second, identical agent_thought frame', async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn(db);
    const outcome = attempt(deps(), backend).run(messageId);
    const call = { tool_name: 'ask_human', tool_call_id: 'call-1', args: { question: 'Which colour?' } };
    // A resumed run announces the deferred call twice (part_start, then function_tool_call), then its result.
    backend.agent({ event_kind: 'part_start', index: 0, part: { part_kind: 'tool-call', ...call } });
    backend.agent({ event_kind: 'function_tool_call', ...call });
    backend.agent({ event_kind: 'function_tool_result', tool_call_id: 'call-1', tool_name: 'ask_human', result: 'blue' });
    backend.delta('Blue it is.');
    backend.succeed({ output: 'Blue it is.' });
    await expect(outcome).resolves.toEqual({ status: 'succeeded' });

    const thoughts = (await events(messageId)).filter((e) => e.event === 'agent_thought').map((e) => JSON.stringify(e.data));
    expect(new Set(thoughts).size, thoughts.join('\n')).toBe(thoughts.length);
    expect(thoughts.map((t) => (JSON.parse(t) as { observation: string }).observation)).toEqual(['', 'blue']);
  });
});

describe('runAgent: the ask_human pause (docs/seeds/000 _pause_for_ask_human)', () => {
  it("answers with the form's question and its markdown", async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn(db);
    const outcome = attempt(deps(), backend).run(messageId);
    backend.succeed({
      deferred_tool_call: {
        tool_call_id: 'call-9',
        tool_name: 'ask_human',
        args: { question: 'Ship it?', markdown: '**Changes:** 3 files', fields: [], actions: [{ id: 'yes', label: 'Yes' }] },
        metadata: {},
      },
    });
    await expect(outcome).resolves.toMatchObject({ status: 'paused', toolCallId: 'call-9' });
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.answer]).toEqual(['paused', 'Ship it?\n\n**Changes:** 3 files']);
    const message = (await events(messageId)).find((e) => e.event === 'message')!;
    expect((message.data as { answer: string }).answer).toBe('Ship it?\n\n**Changes:** 3 files');
  });
});
