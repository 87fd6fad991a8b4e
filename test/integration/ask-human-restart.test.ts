/**
 * The wait survives restarts: while a form waits, the worker is stopped and the Temporal dev server is
 * restarted on the same database file; both come back, the human submits, and the run resumes and
 * completes.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startTemporalDevServer, type DevServer } from '../../scripts/temporal.js';
import type { Stack } from '../../scripts/stack.js';
import { stablePort } from '../../scripts/ports.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let temporal: DevServer;
let port: number;
let uiPort: number;
const dataDir = path.join(inject('testDataDir'), 'restart-temporal');

async function startServer() {
  return startTemporalDevServer({ bin: inject('temporalBin'), dataDir, port, uiPort, headless: true });
}

beforeAll(async () => {
  // Not an ephemeral port: the server restarts on it, and a freed ephemeral port can be taken meanwhile.
  port = await stablePort();
  uiPort = await stablePort();
  temporal = await startServer();
  stack = await startTestStack('ask_restart', { env: { TEMPORAL_ADDRESS: temporal.address }, worker: 'child' });
});
afterAll(async () => {
  await stack?.stop();
  await temporal?.stop();
});

describe('ask_human across restarts', () => {
  // Restarting a server and a worker under CI load takes a while: a generous, explicit budget.
  it('resumes and completes after the worker stopped and the Temporal server restarted mid-wait', { timeout: 180_000 }, async () => {
    const key = stack.demo!.apiKey;
    const { frames } = await chat(stack.apiUrl, key, { query: '/ask Favourite number?', user: 'kai' });
    const hir = frames.find((f) => f.event === 'human_input_required')!;
    const token = (hir.data.data as { form_token: string }).form_token;
    const messageId = hir.data.message_id as string;

    // Stop the worker and restart Temporal on the same db file.
    const child = stack.workerChild!;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    await temporal.stop();
    temporal = await startServer();
    await stack.startWorkerChild();

    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const desc = await stack.temporal.workflow.getHandle(msg.workflow_id).describe();
    expect(desc.status.name).toBe('RUNNING');

    const res = await fetch(`${stack.apiUrl}/v1/form/human_input/${token}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: { answer: '42' }, action: 'submit', user: 'kai' }),
    });
    expect(res.status).toBe(200);
    const { task_id } = (await res.json()) as { task_id: string };
    const attach = await fetch(`${stack.apiUrl}/v1/chat-messages/${task_id}/events?user=kai`, { headers: { authorization: `Bearer ${key}` } });
    const resumed = await readFrames(attach);
    expect(resumed.find((f) => f.event === 'message')!.data.answer).toContain('You answered: "42"');
    await expect(stack.temporal.workflow.getHandle(msg.workflow_id).result()).resolves.toMatchObject({ status: 'succeeded' });
  });
});
