/**
 * The wait survives restarts: while a form waits, the worker is stopped and the Temporal dev server is
 * restarted on the same database file; both come back, the human submits, and the run resumes and
 * completes.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startTemporalDevServer, type DevServer } from '../../stack/temporal.js';
import type { Stack } from '../../stack/start-stack.js';
import { stablePort } from '../../stack/ports.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

const t0 = Date.now();
/** Timestamped progress on stderr: when this test is slow, the log says which step. */
const step = (what: string) => process.stderr.write(`[restart-test +${((Date.now() - t0) / 1000).toFixed(1)}s] ${what}\n`);

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

/** What the workflow is doing, for a failure message: status, pending activities, the last history events. */
async function diagnose(workflowId: string): Promise<string> {
  try {
    const h = stack.temporal.workflow.getHandle(workflowId);
    const d = await h.describe();
    const hist = await h.fetchHistory();
    const events = (hist.events ?? []).slice(-12).map((e) => `${e.eventId}:${e.eventType}`);
    return JSON.stringify({
      status: d.status.name,
      pending: d.raw.pendingActivities?.map((a) => ({
        type: a.activityType?.name,
        attempt: a.attempt,
        state: a.state,
        lastFailure: a.lastFailure?.message,
      })),
      events,
    });
  } catch (err) {
    return `describe failed: ${(err as Error).message}`;
  }
}

describe('ask_human across restarts', () => {
  // Restarting a server and a worker under CI load takes a while: a generous, explicit budget.
  it('resumes and completes after the worker stopped and the Temporal server restarted mid-wait', { timeout: 180_000 }, async () => {
    const key = stack.demo!.apiKey;
    step('chat');
    const { frames } = await chat(stack.apiUrl, key, { query: '/ask Favourite number?', user: 'kai' });
    const hir = frames.find((f) => f.event === 'human_input_required')!;
    const token = (hir.data.data as { form_token: string }).form_token;
    const messageId = hir.data.message_id as string;

    // Stop the worker and restart Temporal on the same db file.
    const child = stack.workerChild!;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    step('worker exited');
    await temporal.stop();
    step('temporal stopped');
    temporal = await startServer();
    step('temporal started');
    await stack.startWorkerChild();
    step('worker started');

    const msg = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
    const desc = await stack.temporal.workflow.getHandle(msg.workflow_id).describe();
    expect(desc.status.name).toBe('RUNNING');
    step('described');

    const res = await fetch(`${stack.apiUrl}/v1/form/human_input/${token}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: { answer: '42' }, action: 'submit', user: 'kai' }),
    });
    expect(res.status).toBe(200);
    step('submitted');
    const { task_id } = (await res.json()) as { task_id: string };
    const attach = await fetch(`${stack.apiUrl}/v1/chat-messages/${task_id}/events?user=kai`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const resumed = await Promise.race([
      readFrames(attach),
      new Promise<never>((_, reject) =>
        setTimeout(
          () => void diagnose(msg.workflow_id).then((d) => reject(new Error(`no resumed answer within 60 s; workflow: ${d}`))),
          60_000,
        ).unref(),
      ),
    ]);
    step('resumed stream read');
    expect(resumed.find((f) => f.event === 'message')!.data.answer).toContain('You answered: "42"');
    await expect(stack.temporal.workflow.getHandle(msg.workflow_id).result()).resolves.toMatchObject({ status: 'succeeded' });
  });
});
