/**
 * Records conversationQueue (workflows/conversation-queue.ts) histories for the replay test
 * (test/unit/workflow-replay.test.ts replays every history under test/fixtures/histories/): the workflow code of
 * *this* checkout coordinates two queued turns on a throwaway Temporal dev server, with scripted activities
 * (claimQueuedTurn hands out two turns, then `empty`; the children are agentTurns on scripts/scripted-activities.ts),
 * and the coordinator's history is written as JSON. Run it on the checkout whose workflow code must keep replaying.
 *
 *   tsx scripts/record-queue-histories.ts test/fixtures/histories/<name>
 */
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { scriptedActivities } from './scripted-activities.js';
import { withRecordingServer } from './recording-server.js';
import { TURN_SEARCH_ATTRIBUTES as SA } from '../core/protocol/workflow-contract.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const outDir = path.resolve(process.argv[2] ?? '');
if (!process.argv[2]) {
  console.error('usage: tsx scripts/record-queue-histories.ts <out dir>');
  process.exit(2);
}

await withRecordingServer('record-queue', async ({ client, native, writeHistory }) => {
  const name = 'conversation-queue-two-turns';
  const taskQueue = `record-${name}-${process.pid}`;
  const { activities } = scriptedActivities(() => ({ status: 'succeeded' }));
  const claims = ['q-1', 'q-2'];
  let claimed = 0;
  const queueActivities = {
    claimQueuedTurn: async ({ conversationId }: { conversationId: string }) => {
      const messageId = claims[claimed++];
      if (!messageId) return { kind: 'empty' };
      return {
        kind: 'turn',
        input: { tenantId: 't', appId: 'a', agentId: 'g', conversationId, messageId, invokeFrom: 'service-api' },
        summary: `Agent turn · recorded · "${messageId}"`,
        details: `conversation \`${conversationId}\`\n\nmessage \`${messageId}\`\n\nqueued (enqueue) at position ${claimed}`,
      };
    },
    // The patched stop check of later code; absent from this history if the recorded code does not call it.
    stopRequestedBeforeStart: async () => false,
  };
  const worker = await Worker.create({
    connection: native,
    taskQueue,
    workflowsPath: path.join(ROOT, 'workflows', 'index.ts'),
    activities: { ...activities, ...queueActivities },
  });
  const workflowId = `conversation-queue-${name}`;
  await worker.runUntil(async () => {
    const h = await client.workflow.start('conversationQueue', {
      taskQueue,
      workflowId,
      args: [{ conversationId: `c-${name}` }],
      typedSearchAttributes: [
        { key: SA.TenantId, value: 't' },
        { key: SA.AppId, value: 'a' },
        { key: SA.ConversationId, value: `c-${name}` },
      ],
    });
    await h.result();
  });
  writeHistory(workflowId, outDir, name);
});
