/**
 * Records agentTurn workflow histories for the replay test (test/unit/workflow-replay.test.ts): the
 * workflow code of *this* checkout runs a few turns on a throwaway Temporal dev server with scripted
 * activities (scripts/scripted-activities.ts: no database, no backend), and each history is written as JSON.
 * (To record an older release, copy both scripts into its checkout.) Run it on a release's
 * checkout and commit the files under test/fixtures/histories/<name>/: every later workflow change must
 * replay them, or be guarded with `patched()`.
 *
 *   tsx scripts/record-histories.ts test/fixtures/histories/<name>
 */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { RunAgentOutcome } from '../activities/index.js';
import { scriptedActivities } from './scripted-activities.js';
import { withRecordingServer } from './recording-server.js';
import { TURN_SEARCH_ATTRIBUTES as SA } from '../core/protocol/workflow-contract.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const outDir = path.resolve(process.argv[2] ?? '');
if (!process.argv[2]) {
  console.error('usage: tsx scripts/record-histories.ts <out dir>');
  process.exit(2);
}

/** One scripted turn: what runAgent returns per call, and what the test does from outside. */
interface Scenario {
  name: string;
  runAgent: RunAgentOutcome[];
  drive?: (h: ReturnType<Client['workflow']['getHandle']>) => Promise<void>;
}

const paused = (formId: string, expiresInMs = 3_600_000): RunAgentOutcome => ({
  status: 'paused',
  toolCallId: `call-${formId}`,
  formId,
  formToken: `tok-${formId}`,
  expiresAt: new Date(Date.now() + expiresInMs).toISOString(),
});

async function waitForPhase(h: ReturnType<Client['workflow']['getHandle']>, phase: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await h.query<{ phase: string }>('turnState')).phase === phase) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`workflow never reached ${phase}`);
}

const scenarios: Scenario[] = [
  { name: 'succeeded', runAgent: [{ status: 'succeeded' }] },
  { name: 'failed', runAgent: [{ status: 'failed', errorCode: 'agent_run_failed' }] },
  {
    name: 'ask-human-submitted',
    runAgent: [paused('form-1'), { status: 'succeeded' }],
    drive: async (h) => {
      await waitForPhase(h, 'waiting_for_human');
      await h.signal('formSubmitted', { formId: 'form-1', resumeMessageId: 'm-resume' });
    },
  },
  {
    name: 'ask-human-expired',
    runAgent: [paused('form-2', 1_500), { status: 'succeeded' }],
  },
  {
    name: 'ask-human-stopped',
    runAgent: [paused('form-3')],
    drive: async (h) => {
      await waitForPhase(h, 'waiting_for_human');
      await h.cancel();
    },
  },
];

await withRecordingServer('record-histories', async ({ client, native, writeHistory }) => {
  for (const sc of scenarios) {
    const taskQueue = `record-${sc.name}-${process.pid}`;
    const { activities } = scriptedActivities((call) => sc.runAgent[Math.min(call, sc.runAgent.length - 1)]!);
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowsPath: path.join(ROOT, 'workflows', 'index.ts'),
      activities,
    });
    const workflowId = `agent-turn-${sc.name}`;
    await worker.runUntil(async () => {
      const h = await client.workflow.start('agentTurn', {
        taskQueue,
        workflowId,
        args: [
          { tenantId: 't', appId: 'a', agentId: 'g', conversationId: `c-${sc.name}`, messageId: `m-${sc.name}`, invokeFrom: 'service-api' },
        ],
        // As api/turns/start.ts starts a turn: the attributes the workflow upserts (MessageIds, TurnStatus) are present from the start.
        typedSearchAttributes: [
          { key: SA.MessageIds, value: [`m-${sc.name}`] },
          { key: SA.TurnStatus, value: 'running' },
        ],
      });
      await sc.drive?.(client.workflow.getHandle(workflowId));
      await h.result().catch(() => undefined);
    });
    writeHistory(workflowId, outDir, sc.name);
  }
});
