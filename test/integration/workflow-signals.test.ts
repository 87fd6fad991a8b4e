/**
 * The turn workflow on the real Temporal dev server with scripted activities: the ordering races that
 * the whole-stack tests only hit by chance are forced here.
 *
 * A form's token reaches the client before runAgent's completion is processed by the workflow, so a
 * submission can be signalled while the workflow does not yet know the form id. It must not be lost
 * (before the fix the workflow dropped it and sat until the form's expiry timer).
 */
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities } from '../../activities/index.js';
import { scriptedActivities } from '../../scripts/scripted-activities.js';
import { AGENT_TURN_WORKFLOW, formSubmittedSignal, type AgentTurnInput, type AgentTurnResult } from '../../workflows/definitions.js';

const WORKFLOWS_PATH = path.resolve(import.meta.dirname, '../../workflows/index.ts');

let connection: Connection;
let client: Client;
let nativeConnection: NativeConnection;

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection });
  nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
});
afterAll(async () => {
  await connection?.close();
  await nativeConnection?.close();
});

async function withWorker<T>(taskQueue: string, activities: Activities, fn: () => Promise<T>): Promise<T> {
  const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowsPath: WORKFLOWS_PATH, activities });
  return worker.runUntil(fn);
}

function turnInput(messageId: string): AgentTurnInput {
  return { tenantId: 't', appId: 'a', agentId: 'g', conversationId: `c-${messageId}`, messageId, invokeFrom: 'service-api' };
}

describe('agentTurn signal ordering', () => {
  it('keeps a form submission signalled before the workflow processed the pause', async () => {
    const taskQueue = `wf-signals-${process.pid}-${Date.now()}`;
    const workflowId = `agent-turn-early-${Date.now()}`;
    const { calls, activities } = scriptedActivities(async (call) => {
      if (call > 0) return { status: 'succeeded' };
      // The form exists and the client has its token: the human submits before this activity returns.
      const handle = client.workflow.getHandle(Context.current().info.workflowExecution!.workflowId);
      await handle.signal(formSubmittedSignal, { formId: 'form-1', resumeMessageId: 'm-resume' });
      // Make sure the signal is in history (and was handled) before the completion.
      for (let i = 0; i < 100; i++) {
        const h = await handle.fetchHistory();
        const n = h?.events?.filter((e) => e.workflowTaskCompletedEventAttributes).length ?? 0;
        if (h?.events?.some((e) => e.workflowExecutionSignaledEventAttributes) && n >= 2) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      // A short expiry: without the fix the turn would take the timeout path after 2 s.
      return {
        status: 'paused',
        toolCallId: 'call-1',
        formId: 'form-1',
        formToken: 'tok',
        expiresAt: new Date(Date.now() + 2_000).toISOString(),
      };
    });
    const result = await withWorker(taskQueue, activities, () =>
      client.workflow.execute<(i: AgentTurnInput) => Promise<AgentTurnResult>>(AGENT_TURN_WORKFLOW, {
        taskQueue,
        workflowId,
        args: [turnInput('m-1')],
      }),
    );
    expect(result).toEqual({ status: 'succeeded', messageId: 'm-resume' });
    expect(calls.filter((c) => c.name === 'runAgent').map((c) => (c.input as { messageId: string }).messageId)).toEqual([
      'm-1',
      'm-resume',
    ]);
    expect(calls.some((c) => c.name === 'expireForm' || c.name === 'createTimeoutResume')).toBe(false);
    // The continuation's preparation (inside runAgent since `prepare-in-run-agent`) closes the form's call.
    expect(
      calls.find((c) => c.name === 'runAgent' && (c.input as { prepare?: { resumeFormId?: string } }).prepare?.resumeFormId === 'form-1'),
    ).toBeTruthy();
  });

  it('ignores a submission for another form and resumes on its own form', async () => {
    const taskQueue = `wf-signals-b-${process.pid}-${Date.now()}`;
    const workflowId = `agent-turn-other-${Date.now()}`;
    const { calls, activities } = scriptedActivities(async (call) => {
      if (call > 0) return { status: 'succeeded' };
      return {
        status: 'paused',
        toolCallId: 'call-1',
        formId: 'form-2',
        formToken: 'tok',
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      };
    });
    const result = await withWorker(taskQueue, activities, async () => {
      const handle = await client.workflow.start(AGENT_TURN_WORKFLOW, { taskQueue, workflowId, args: [turnInput('m-2')] });
      for (let i = 0; i < 200 && (await handle.query<{ phase: string }>('turnState')).phase !== 'waiting_for_human'; i++)
        await new Promise((r) => setTimeout(r, 50));
      await handle.signal(formSubmittedSignal, { formId: 'someone-elses-form', resumeMessageId: 'm-wrong' });
      await handle.signal(formSubmittedSignal, { formId: 'form-2', resumeMessageId: 'm-right' });
      return (await handle.result()) as AgentTurnResult;
    });
    expect(result).toEqual({ status: 'succeeded', messageId: 'm-right' });
    expect(calls.filter((c) => c.name === 'runAgent').map((c) => (c.input as { messageId: string }).messageId)).toEqual(['m-2', 'm-right']);
  });
});
