/**
 * runAgent as one activity, with the SDK's own MockActivityEnvironment: a real PostgreSQL and a scripted
 * agent backend (the real backend is covered by the integration tests). Heartbeats, a user stop, a lost
 * Temporal server (the SDK cancels locally without a cancel request) and a broken event stream.
 */
import { ActivityCancellationDetails, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunAgentOutcome } from '../../activities/run-agent/index.js';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { freshDatabase } from '../support/db.js';
import { attempt as harnessAttempt, committed, preparedTurn as prepared, ScriptedBackend } from './run-agent-harness.js';

let db: Db;
const config = loadConfig({}, { DELTA_DEBOUNCE_MS: 20, STOP_WAIT_MS: 2000 });
const logger = createLogger('run-agent-test', 'silent');

beforeAll(async () => {
  db = createDb(await freshDatabase('run_agent_activity'));
});
afterAll(async () => {
  await db?.$disconnect();
});

const deps = () => ({ db, config, logger });
const preparedTurn = () => prepared(db);
const attempt = (backend: ScriptedBackend, n: number, heartbeatDetails?: unknown) => harnessAttempt(deps(), backend, n, heartbeatDetails);

async function clientEvents(messageId: string) {
  return db.messageEvent.findMany({ where: { message_id: messageId }, orderBy: { seq: 'asc' } });
}

function streamedAnswer(events: { event: string; data: unknown }[]): string {
  return events
    .filter((e) => e.event === 'agent_message')
    .map((e) => (e.data as { answer: string }).answer)
    .join('');
}

describe('runAgent (activity)', () => {
  it('heartbeats the backend run id and each committed cursor', async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn();
    const a = attempt(backend, 1);
    const outcome = a.run(messageId);
    backend.delta('Hello');
    await committed(a.env, '2');
    backend.delta(', world');
    await committed(a.env, '3');
    backend.succeed({ output: 'Hello, world' });
    await expect(outcome).resolves.toEqual({ status: 'succeeded' } satisfies RunAgentOutcome);

    expect(a.beats[0]).toEqual({ backendRunId: backend.runId, cursor: null });
    const cursors = [...new Set(a.beats.map((b) => b.cursor))];
    expect(cursors.slice(0, 3)).toEqual([null, '2', '3']);
    expect(a.beats.every((b) => b.backendRunId === backend.runId)).toBe(true);
  });

  it('a user stop cancels the backend run as user_stop and ends the message stopped', async () => {
    const backend = new ScriptedBackend();
    const { messageId, conversationId } = await preparedTurn();
    const a = attempt(backend, 1);
    const outcome = a.run(messageId);
    backend.delta('Half an ');
    await committed(a.env, '2');
    a.env.cancel('CANCELLED', new ActivityCancellationDetails({ cancelRequested: true }));

    await expect(outcome).rejects.toBeInstanceOf(CancelledFailure);
    expect(backend.cancels).toEqual([{ reason: 'user_stop', message: 'Stopped by the user.' }]);
    const run = await db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } });
    expect(run.terminal_type).toBe('run_cancelled');
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.answer]).toEqual(['stopped', 'Half an ']);
    const events = await clientEvents(messageId);
    expect(events.slice(-2).map((e) => [e.event, e.source_key])).toEqual([
      ['message', 'terminal:message'],
      ['message_end', 'terminal:message_end'],
    ]);
    expect((await db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id).toBeNull();
  });

  it('a lost Temporal server (heartbeat timeout) leaves the backend run alone; the retry finishes the whole answer once', async () => {
    const backend = new ScriptedBackend();
    const { messageId, conversationId } = await preparedTurn();
    const first = attempt(backend, 1);
    const outcome1 = first.run(messageId);
    backend.delta('The whole ');
    await committed(first.env, '2');
    backend.delta('answer ');
    await committed(first.env, '3');
    // What the SDK does when heartbeats cannot reach the server past the heartbeat timeout.
    first.env.cancel('TIMED_OUT', new ActivityCancellationDetails({ timedOut: true }));

    const err = await outcome1.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).nonRetryable).toBe(false);
    expect(backend.cancels).toEqual([]);
    const mid = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([mid.status, mid.answer]).toEqual(['running', 'The whole answer ']);
    expect((await db.agentBackendRun.findUniqueOrThrow({ where: { message_id: messageId } })).terminal_type).toBeNull();
    expect((await db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id).toBe(messageId);

    // The run went on at the backend while the server was away; the next attempt reattaches to it.
    backend.delta('is here.');
    backend.succeed({ output: 'The whole answer is here.' });
    const second = attempt(backend, 2, first.beats.at(-1));
    await expect(second.run(messageId)).resolves.toEqual({ status: 'succeeded' });

    expect(backend.created).toBe(1);
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    expect([msg.status, msg.answer]).toEqual(['succeeded', 'The whole answer is here.']);
    const events = await clientEvents(messageId);
    expect(streamedAnswer(events)).toBe('The whole answer is here.');
    expect(events.filter((e) => e.event === 'message').map((e) => (e.data as { answer: string }).answer)).toEqual([
      'The whole answer is here.',
    ]);
    expect(events.filter((e) => e.event === 'message_end')).toHaveLength(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });

  it('a stream that breaks while the event before it is being committed rejects no read unhandled (a backend killed mid-turn)', async () => {
    // The read after an event is started before that event is handled; the first text is committed at once (a
    // database write), and the stream breaks meanwhile: that read rejects while nobody awaits it yet. Unhandled, the
    // process guard logs it as fatal ("a missing error handler") and UNCAUGHT_ERROR_POLICY=exit ends the worker.
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const backend = new ScriptedBackend();
      const { messageId } = await preparedTurn();
      backend.breakAfter = 2; // run_started, the first text, then the break
      const a = attempt(backend, 1);
      const outcome = a.run(messageId);
      backend.delta('First, ');
      backend.delta('then the rest.');
      backend.succeed({ output: 'First, then the rest.' });
      await expect(outcome).resolves.toEqual({ status: 'succeeded' });
      expect(streamedAnswer(await clientEvents(messageId))).toBe('First, then the rest.');
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('reattaches after a broken event stream without repeating or losing text', async () => {
    const backend = new ScriptedBackend();
    const { messageId } = await preparedTurn();
    backend.breakAfter = 3;
    const a = attempt(backend, 1);
    const outcome = a.run(messageId);
    backend.delta('One, ');
    backend.delta('two, ');
    backend.delta('three, ');
    backend.delta('four.');
    backend.succeed({ output: 'One, two, three, four.' });
    await expect(outcome).resolves.toEqual({ status: 'succeeded' });

    const events = await clientEvents(messageId);
    expect(streamedAnswer(events)).toBe('One, two, three, four.');
    expect(events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect((await db.message.findUniqueOrThrow({ where: { id: messageId } })).answer).toBe('One, two, three, four.');
  });
});
