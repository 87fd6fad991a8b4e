/**
 * What the api owes Temporal survives a Temporal outage and the death of the api that accepted it: a form
 * submitted while Temporal is down is answered 200 at once, and after that api process is SIGKILLed and
 * Temporal comes back, another process delivers the signal — exactly once — and the turn resumes; a stop
 * or a conversation delete while Temporal is down is answered at once and the turn ends stopped once
 * Temporal is back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { enqueueOutbox } from '../../core/domain/outbox.js';
import { freePort, stablePort } from '../../stack/ports.js';
import { configToEnv, type Stack } from '../../stack/start-stack.js';
import { startTemporalDevServer, type DevServer } from '../../stack/temporal.js';
import { chat, FrameReader, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dataDir = path.join(inject('testDataDir'), 'outbox-temporal');
let stack: Stack;
let temporal: DevServer;
let port: number;
let uiPort: number;
let replica: ChildProcess | null = null;

const startTemporal = () => startTemporalDevServer({ bin: inject('temporalBin'), dataDir, port, uiPort, headless: true });
/** Progress on stderr, with how long delivery took after Temporal came back (a figure, not an assertion). */
const note = (what: string) => process.stderr.write(`[outbox] ${what}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(250);
  }
}

interface OutboxRow {
  kind: string;
  workflow_id: string;
  signal_name: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  delivered_at: Date | null;
  last_error: string | null;
}
const outboxRows = (workflowId: string) =>
  stack.db.$queryRaw<
    OutboxRow[]
  >`select kind, workflow_id, signal_name, payload, attempts, delivered_at, last_error from temporal_outbox where workflow_id = ${workflowId} order by created_at`;

/** A separate api process (as in production), on this stack's database, Temporal and agent backend. */
async function startReplica(): Promise<{ url: string; child: ChildProcess }> {
  const apiPort = await freePort();
  fs.mkdirSync(dataDir, { recursive: true });
  const log = fs.openSync(path.join(dataDir, 'api-replica.log'), 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'api/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...configToEnv(stack.config),
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      AGENT_BACKEND_URL: stack.agentBackendUrl,
      API_PORT: String(apiPort),
      API_INTERNAL_URL: '',
    },
    // Its log lines go next to the test data, for whoever debugs a failure (KEEP_TEST_DATA=1).
    stdio: ['ignore', log, log],
  });
  const url = `http://127.0.0.1:${apiPort}`;
  await eventually('the replica answers /healthz', () =>
    fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ),
  );
  return { url, child };
}

beforeAll(async () => {
  // Not ephemeral ports: the server restarts on them.
  port = await stablePort();
  uiPort = await stablePort();
  temporal = await startTemporal();
  stack = await startTestStack('outbox', { env: { TEMPORAL_ADDRESS: temporal.address }, worker: 'child' });
});
afterAll(async () => {
  replica?.kill('SIGKILL');
  await stack?.stop();
  await temporal?.stop();
});

async function askHuman(user: string) {
  const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: '/ask Favourite number?', user });
  const hir = frames.find((f) => f.event === 'human_input_required')!;
  const messageId = hir.data.message_id as string;
  const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
  return { token: (hir.data.data as { form_token: string }).form_token, messageId, workflowId: msg.workflow_id };
}

describe('the Temporal outbox', () => {
  it(
    'delivers a form submitted during a Temporal outage after the api that accepted it was killed; the turn resumes once',
    { timeout: 180_000 },
    async () => {
      const key = stack.demo!.apiKey;
      const { token, workflowId } = await askHuman('kai');
      const r = await startReplica();
      replica = r.child;

      await temporal.stop();
      const submit = fetch(`${r.url}/v1/form/human_input/${token}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: { answer: '42' }, action: 'submit', user: 'kai' }),
      });
      // Answered promptly: the submission and its owed signal are committed; delivery is the outbox's job.
      const res = await Promise.race([submit, sleep(15_000).then(() => null)]);
      expect(res?.status).toBe(200);
      const { task_id } = (await res!.json()) as { task_id: string };
      const [pending] = await outboxRows(workflowId);
      expect(pending).toMatchObject({
        kind: 'signal',
        signal_name: 'formSubmitted',
        delivered_at: null,
        payload: { resumeMessageId: task_id },
      });
      expect(pending!.last_error).not.toBeNull();

      // The accepting api dies; Temporal comes back; the stack's api and worker processes are left to deliver.
      const exited = new Promise((x) => r.child.once('exit', x));
      r.child.kill('SIGKILL');
      await exited;
      replica = null;
      temporal = await startTemporal();
      const back = Date.now();

      const attach = await fetch(`${stack.apiUrl}/v1/chat-messages/${task_id}/events?user=kai`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const resumed = await Promise.race([
        readFrames(attach),
        sleep(90_000).then(() => Promise.reject(new Error('the turn did not resume within 90 s'))),
      ]);
      expect(resumed.find((f) => f.event === 'message')!.data.answer).toContain('You answered: "42"');
      note(`continuation answered ${Date.now() - back} ms after Temporal was back`);
      await expect(stack.temporal.workflow.getHandle(workflowId).result()).resolves.toMatchObject({ status: 'succeeded' });

      const [done] = await outboxRows(workflowId);
      expect(done!.delivered_at).not.toBeNull();
      const history = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
      const signals = (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes);
      expect(signals).toHaveLength(1);

      // A late redelivery to the finished workflow is settled as gone, not retried forever.
      const late = await enqueueOutbox(stack.db, { kind: 'signal', workflowId, signalName: 'formSubmitted', payload: pending!.payload });
      expect(await stack.outbox.deliverNow(late)).toBe('gone');
    },
  );

  it(
    'delivers a stop sent during a Temporal outage once Temporal is back; the waiting turn ends stopped',
    { timeout: 180_000 },
    async () => {
      const key = stack.demo!.apiKey;
      const { messageId, workflowId } = await askHuman('lea');

      await temporal.stop();
      const stop = fetch(`${stack.apiUrl}/v1/chat-messages/${messageId}/stop`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'lea' }),
      });
      const res = await Promise.race([stop, sleep(15_000).then(() => null)]);
      expect(res?.status).toBe(200);
      expect(await res!.json()).toEqual({ result: 'success' });
      const [pending] = await outboxRows(workflowId);
      expect(pending).toMatchObject({ kind: 'cancel', delivered_at: null });

      temporal = await startTemporal();
      const back = Date.now();
      const handle = stack.temporal.workflow.getHandle(workflowId);
      await eventually(
        'the workflow is cancelled',
        async () => (await handle.describe().catch(() => null))?.status.name === 'CANCELLED',
        90_000,
      );
      note(`workflow cancelled ${Date.now() - back} ms after Temporal was back`);
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
      expect(msg.status).toBe('stopped');
      const form = await stack.db.humanInputForm.findFirstOrThrow({ where: { message_id: messageId } });
      expect(form.status).toBe('cancelled');
      const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } });
      expect(conv.active_message_id).toBeNull();
      const [done] = await outboxRows(workflowId);
      expect(done!.delivered_at).not.toBeNull();

      // Stopping the finished turn again is settled at once (the server acknowledges a repeated cancel), not
      // retried forever.
      const again = await fetch(`${stack.apiUrl}/v1/chat-messages/${messageId}/stop`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'lea' }),
      });
      expect(again.status).toBe(200);
      const rows = await outboxRows(workflowId);
      expect(rows).toHaveLength(2);
      expect(rows[1]).toMatchObject({ kind: 'cancel', attempts: 1, delivered_at: expect.any(Date) });
    },
  );

  it(
    'cancels the waiting turn of a conversation deleted during a Temporal outage once Temporal is back',
    { timeout: 180_000 },
    async () => {
      const key = stack.demo!.apiKey;
      const { messageId, workflowId } = await askHuman('max');
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });

      await temporal.stop();
      const del = fetch(`${stack.apiUrl}/v1/conversations/${msg.conversation_id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'max' }),
      });
      const res = await Promise.race([del, sleep(15_000).then(() => null)]);
      expect(res?.status).toBe(204);
      const [pending] = await outboxRows(workflowId);
      expect(pending).toMatchObject({ kind: 'cancel', delivered_at: null });

      temporal = await startTemporal();
      const handle = stack.temporal.workflow.getHandle(workflowId);
      await eventually(
        'the workflow is cancelled',
        async () => (await handle.describe().catch(() => null))?.status.name === 'CANCELLED',
        90_000,
      );
      const form = await stack.db.humanInputForm.findFirstOrThrow({ where: { message_id: messageId } });
      expect(form.status).toBe('cancelled');
      const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } });
      expect(conv.deleted_at).not.toBeNull();
      expect(conv.active_message_id).toBeNull();
    },
  );
  it(
    'stops a streaming turn during a Temporal outage: the answer ends stopped at once, the workflow closes once Temporal is back',
    { timeout: 180_000 },
    async () => {
      const key = stack.demo!.apiKey;
      const res = await fetch(`${stack.apiUrl}/v1/chat-messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: {}, query: '/slow 50 /long 300', user: 'noa', response_mode: 'streaming' }),
      });
      const reader = new FrameReader(res);
      let n = 0;
      const head = await reader.read((f) => f.event === 'agent_message' && ++n === 2);
      const taskId = head[0]!.data.task_id as string;
      const { workflow_id: workflowId } = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });

      await temporal.stop();
      const stop = fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'noa' }),
      });
      const stopped = await Promise.race([stop, sleep(15_000).then(() => null)]);
      expect(stopped?.status).toBe(200);
      // The backend's fast-path cancel ends the answer now; the client sees message + message_end.
      const rest = await Promise.race([
        reader.read(),
        sleep(60_000).then(() => Promise.reject(new Error('the stream did not end within 60 s'))),
      ]);
      expect(rest.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);

      temporal = await startTemporal();
      const handle = stack.temporal.workflow.getHandle(workflowId);
      await eventually(
        'the workflow is closed',
        async () => {
          const status = (await handle.describe().catch(() => null))?.status.name;
          return status !== undefined && status !== 'RUNNING';
        },
        90_000,
      );
      const msg = await stack.db.message.findUniqueOrThrow({ where: { id: taskId } });
      expect(msg.status).toBe('stopped');
      const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id } });
      expect(conv.active_message_id).toBeNull();
      await eventually('the cancel is settled', async () => (await outboxRows(workflowId))[0]?.delivered_at);
    },
  );
});
