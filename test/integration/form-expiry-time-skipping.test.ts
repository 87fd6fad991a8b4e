/**
 * The ask_human wait at its real length, on the SDK's time-skipping test server: a form that nobody answers
 * expires after HUMAN_INPUT_FORM_EXPIRY_HOURS (36 h by default) of workflow time, which passes here in
 * milliseconds, and the turn then continues with a `timeout` result; a submission an hour before the expiry
 * resumes the turn without touching the expiry path. Activities are scripted (scripts/scripted-activities.ts):
 * this tests the workflow's timer logic, the stack tests cover the rows behind it.
 */
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvSchema } from '../../core/platform/config.js';
import { scriptedActivities } from '../../scripts/scripted-activities.js';
import { locateTemporalTestServer } from '../../stack/temporal.js';
import { AGENT_TURN_WORKFLOW, formSubmittedSignal, type AgentTurnInput, type AgentTurnResult } from '../../workflows/definitions.js';

const WORKFLOWS_PATH = path.resolve(import.meta.dirname, '../../workflows/index.ts');
const HOUR = 3_600_000;
// The product's default, read from the config schema rather than restated here.
const EXPIRY_HOURS = EnvSchema.parse({}).HUMAN_INPUT_FORM_EXPIRY_HOURS;

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const bin = locateTemporalTestServer({ log: (m) => console.error(m) });
  env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: bin } } });
});
afterAll(async () => {
  await env?.teardown();
});

function turnInput(messageId: string): AgentTurnInput {
  return { tenantId: 't', appId: 'a', agentId: 'g', conversationId: `c-${messageId}`, messageId, invokeFrom: 'service-api' };
}

/**
 * runAgent pauses on its first call with a form that expires EXPIRY_HOURS of workflow time later; `times`
 * records the server's clock at each runAgent call (the pause and the continuation).
 */
function pausingActivities() {
  const times: number[] = [];
  const scripted = scriptedActivities(async (call) => {
    times.push(await env.currentTimeMs());
    if (call > 0) return { status: 'succeeded' };
    const expiresAt = new Date(times[0]! + EXPIRY_HOURS * HOUR).toISOString();
    return { status: 'paused', toolCallId: 'call-1', formId: 'form-1', formToken: 'tok', expiresAt };
  });
  return { ...scripted, times };
}

describe('ask_human form expiry at its real length (time-skipping test server)', () => {
  it('expires an unanswered form after 36 hours of workflow time and resumes the turn with a timeout', async () => {
    expect(EXPIRY_HOURS).toBe(36);
    const taskQueue = `expiry-${process.pid}-${Date.now()}`;
    const { calls, activities, times } = pausingActivities();
    const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowsPath: WORKFLOWS_PATH, activities });
    const result = await worker.runUntil(
      env.client.workflow.execute<(i: AgentTurnInput) => Promise<AgentTurnResult>>(AGENT_TURN_WORKFLOW, {
        taskQueue,
        workflowId: `expiry-${Date.now()}`,
        args: [turnInput('m-1')],
      }),
    );
    // From the pause to the continuation: the form's whole lifetime, not a moment less.
    const waited = times[1]! - times[0]!;
    expect(waited).toBeGreaterThanOrEqual(EXPIRY_HOURS * HOUR);
    expect(waited).toBeLessThan((EXPIRY_HOURS + 1) * HOUR);
    const names = calls.map((c) => c.name);
    expect(names).toContain('expireForm');
    const resume = calls.find((c) => c.name === 'createTimeoutResume')!.input as {
      pausedMessageId: string;
      formId: string;
      resumeMessageId: string;
    };
    expect(resume).toMatchObject({ pausedMessageId: 'm-1', formId: 'form-1' });
    // The continuation runs as the new message, with the form id so its run gets the `timeout` result.
    expect(calls.filter((c) => c.name === 'runAgent').map((c) => (c.input as { messageId: string }).messageId)).toEqual([
      'm-1',
      resume.resumeMessageId,
    ]);
    // The continuation's preparation (inside runAgent since `prepare-in-run-agent`) closes the form's call.
    expect(
      calls.find((c) => c.name === 'runAgent' && (c.input as { prepare?: { resumeFormId?: string } }).prepare?.resumeFormId === 'form-1'),
    ).toBeTruthy();
    expect(result).toEqual({ status: 'succeeded', messageId: resume.resumeMessageId });
  });

  it('resumes on a submission made 35 hours in, without the expiry path', async () => {
    const taskQueue = `expiry-b-${process.pid}-${Date.now()}`;
    const { calls, activities, times } = pausingActivities();
    const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowsPath: WORKFLOWS_PATH, activities });
    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(AGENT_TURN_WORKFLOW, {
        taskQueue,
        workflowId: `expiry-b-${Date.now()}`,
        args: [turnInput('m-2')],
      });
      while ((await handle.query<{ phase: string }>('turnState')).phase !== 'waiting_for_human') await env.sleep(1000);
      await env.sleep((EXPIRY_HOURS - 1) * HOUR);
      await handle.signal(formSubmittedSignal, { formId: 'form-1', resumeMessageId: 'm-2-resume' });
      return (await handle.result()) as AgentTurnResult;
    });
    expect(result).toEqual({ status: 'succeeded', messageId: 'm-2-resume' });
    expect(times[1]! - times[0]!).toBeLessThan(EXPIRY_HOURS * HOUR);
    expect(calls.some((c) => c.name === 'expireForm' || c.name === 'createTimeoutResume')).toBe(false);
  });
});
