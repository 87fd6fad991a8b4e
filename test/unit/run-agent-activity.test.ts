/**
 * runAgent as one activity, with the SDK's own MockActivityEnvironment: a real PostgreSQL and a scripted
 * agent backend (the real backend is covered by the integration tests). Heartbeats, a user stop, a lost
 * Temporal server (the SDK cancels locally without a cancel request) and a broken event stream.
 */
import crypto from 'node:crypto';
import { ActivityCancellationDetails, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunAgent, type RunAgentOutcome } from '../../activities/run-agent/index.js';
import type { AgentBackendClient } from '../../core/backend-client.js';
import { loadConfig } from '../../core/config.js';
import { createDb, type Db } from '../../core/db.js';
import { createLogger } from '../../core/logger.js';
import { emptyUsage, isTerminal, type RunEvent } from '../../core/protocol/run.js';
import { freshDatabase } from '../support/db.js';

/** The backend's run as the activity sees it: events appended by the test, streamed after a cursor. */
class ScriptedBackend {
  readonly runId = `backend-run-${crypto.randomUUID()}`;
  readonly events: RunEvent[] = [];
  readonly cancels: { reason?: string; message?: string }[] = [];
  created = 0;
  /** Break the next stream (once) after it has yielded this many events. */
  breakAfter: number | null = null;
  private wake: (() => void)[] = [];

  constructor() {
    this.events.push({ id: '1', run_id: this.runId, created_at: new Date().toISOString(), type: 'run_started', data: {} });
  }

  push(...evs: RunEvent[]): void {
    this.events.push(...evs);
    for (const w of this.wake.splice(0)) w();
  }

  nextId(): string {
    return String(this.events.length + 1);
  }

  delta(text: string): void {
    this.push({
      id: this.nextId(),
      run_id: this.runId,
      created_at: new Date().toISOString(),
      type: 'agent_message_delta',
      data: { delta: text },
    });
  }

  succeed(output: string): void {
    this.push({
      id: this.nextId(),
      run_id: this.runId,
      created_at: new Date().toISOString(),
      type: 'run_succeeded',
      data: {
        output,
        usage: { ...emptyUsage(), completion_tokens: 7, total_tokens: 7 },
        session_snapshot: { schema_version: 1, layers: [] },
      },
    });
  }

  createRun = async (): Promise<{ run_id: string; status: 'running' }> => {
    this.created += 1;
    return { run_id: this.runId, status: 'running' };
  };

  cancelRun = async (_runId: string, body: { reason?: string; message?: string } = {}): Promise<{ ended: boolean }> => {
    this.cancels.push(body);
    this.push({
      id: this.nextId(),
      run_id: this.runId,
      created_at: new Date().toISOString(),
      type: 'run_cancelled',
      data: { reason: body.reason, message: body.message, usage: emptyUsage() },
    });
    return { ended: false };
  };

  streamEvents = async function* (
    this: ScriptedBackend,
    _runId: string,
    after: string | null,
    signal?: AbortSignal,
  ): AsyncGenerator<RunEvent> {
    let i = after === null ? 0 : this.events.findIndex((e) => Number(e.id) > Number(after));
    if (i < 0) i = this.events.length;
    let yielded = 0;
    for (;;) {
      while (i < this.events.length) {
        if (this.breakAfter !== null && yielded >= this.breakAfter) {
          this.breakAfter = null;
          throw new Error('socket hang up');
        }
        const ev = this.events[i++]!;
        yielded += 1;
        yield ev;
        if (isTerminal(ev)) return;
      }
      if (signal?.aborted) return;
      await new Promise<void>((resolve) => {
        this.wake.push(resolve);
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  };
}

let db: Db;
const config = loadConfig({}, { DELTA_DEBOUNCE_MS: 20, STOP_WAIT_MS: 2000 });
const logger = createLogger('run-agent-test', 'silent');

beforeAll(async () => {
  db = createDb(await freshDatabase('run_agent_activity'));
});
afterAll(async () => {
  await db?.$disconnect();
});

/** A conversation holding the lock of one pending message whose run request is built (prepareTurn's result). */
async function preparedTurn(): Promise<{ messageId: string; conversationId: string }> {
  const tenantId = crypto.randomUUID();
  const appId = crypto.randomUUID();
  const messageId = crypto.randomUUID();
  const conv = await db.conversation.create({
    data: { tenant_id: tenantId, app_id: appId, active_message_id: messageId, dialogue_count: 1 },
  });
  await db.message.create({
    data: { id: messageId, tenant_id: tenantId, app_id: appId, conversation_id: conv.id, query: 'hello', workflow_id: `turn-${messageId}` },
  });
  await db.agentBackendRun.create({ data: { message_id: messageId, request: { query: 'hello' } } });
  return { messageId, conversationId: conv.id };
}

function attempt(backend: ScriptedBackend, n: number, heartbeatDetails?: unknown) {
  const env = new MockActivityEnvironment(
    { attempt: n, heartbeatTimeoutMs: 5000, heartbeatDetails },
    { logger: new DefaultLogger('ERROR') },
  );
  const beats: { backendRunId: string | null; cursor: string | null }[] = [];
  env.on('heartbeat', (d: { backendRunId: string | null; cursor: string | null }) => beats.push(d));
  const runAgent = createRunAgent({ db, backend: backend as unknown as AgentBackendClient, config, logger });
  return { env, beats, run: (messageId: string) => env.run(runAgent, { messageId }) };
}

/** Resolves once a heartbeat reports this cursor committed. */
function committed(env: MockActivityEnvironment, cursor: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (d: { cursor: string | null }) => {
      if (d.cursor === cursor) {
        env.off('heartbeat', on);
        resolve();
      }
    };
    env.on('heartbeat', on);
  });
}

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
    backend.succeed('Hello, world');
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
    backend.succeed('The whole answer is here.');
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
    backend.succeed('One, two, three, four.');
    await expect(outcome).resolves.toEqual({ status: 'succeeded' });

    const events = await clientEvents(messageId);
    expect(streamedAnswer(events)).toBe('One, two, three, four.');
    expect(events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect((await db.message.findUniqueOrThrow({ where: { id: messageId } })).answer).toBe('One, two, three, four.');
  });
});
