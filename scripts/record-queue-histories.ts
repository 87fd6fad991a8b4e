/**
 * Records conversationQueue (workflows/conversation-queue.ts) histories for the replay test
 * (test/unit/workflow-replay.test.ts replays every history under test/fixtures/histories/): the workflow code of
 * *this* checkout coordinates two queued turns on a throwaway Temporal dev server, with scripted activities
 * (claimQueuedTurn hands out two turns, then `empty`; the children are agentTurns on scripts/scripted-activities.ts),
 * and the coordinator's history is written as JSON. Run it on the checkout whose workflow code must keep replaying.
 *
 *   tsx scripts/record-queue-histories.ts test/fixtures/histories/<name>
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { freePort } from '../stack/ports.js';
import { scriptedActivities } from './scripted-activities.js';
import { locateTemporal, startTemporalDevServer } from '../stack/temporal.js';
import { TURN_SEARCH_ATTRIBUTES as SA } from '../workflows/search-attributes.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const outDir = path.resolve(process.argv[2] ?? '');
if (!process.argv[2]) {
  console.error('usage: tsx scripts/record-queue-histories.ts <out dir>');
  process.exit(2);
}

Runtime.install({ logger: new DefaultLogger('WARN') });
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'record-queue-'));
const bin = await locateTemporal({});
const temporal = await startTemporalDevServer({ bin, dataDir, port: await freePort(), uiPort: await freePort(), headless: true });
const connection = await Connection.connect({ address: temporal.address });
const client = new Client({ connection });
const native = await NativeConnection.connect({ address: temporal.address });
fs.mkdirSync(outDir, { recursive: true });
try {
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
  const json = execFileSync(bin, ['workflow', 'show', '--address', temporal.address, '--workflow-id', workflowId, '--output', 'json'], {
    encoding: 'utf8',
  });
  fs.writeFileSync(path.join(outDir, `${name}.json`), json);
  console.log(`recorded ${name}: ${(JSON.parse(json) as { events: unknown[] }).events.length} events`);
} finally {
  await connection.close();
  await native.close();
  await temporal.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
