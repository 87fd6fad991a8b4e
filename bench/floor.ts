/**
 * The Temporal floor, measured in the same run on the same server: a bare workflow of a turn's shape
 * (bench/floor-workflows.ts — eager start, one local activity, one activity, the turn's search attributes
 * and summary) on its own task queue, with its own worker in this process. Its "first token" is the moment
 * its activity starts: no turn of this shape can answer sooner on this server, so the durable path's extra
 * first token is held against it ("extra over floor").
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from '../core/platform/logger.js';
import { TURN_SEARCH_ATTRIBUTES as SA } from '../core/protocol/workflow-contract.js';
import { installRuntimeLogger } from '../worker/start.js';
import { nowMs, type TurnSample } from './client.js';
import type { FloorActivities } from './floor-workflows.js';

const FLOOR_WORKFLOWS_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'floor-workflows.ts');
export const FLOOR_TASK_QUEUE = 'bench-floor';

export interface FloorHarness {
  client: Client;
  /** One floor turn: start → activity started (ttft) → workflow closed (end). */
  turn: () => Promise<TurnSample>;
  /** Starts that the server handed straight back to this worker (eager start) / all starts. */
  eager: { requested: boolean; eagerlyStarted: number; started: number };
  stop: () => Promise<void>;
}

export async function startFloor(opts: {
  temporalAddress: string;
  namespace: string;
  logger: Logger;
  logLevel: string;
}): Promise<FloorHarness> {
  installRuntimeLogger(opts.logger, opts.logLevel);
  // One connection for the worker and the client: eager start needs the starting client to share it.
  const connection = await NativeConnection.connect({ address: opts.temporalAddress });
  const activityStarted = new Map<string, number>();
  const activities: FloorActivities = {
    floorPrepare: async () => undefined,
    floorRun: async ({ id }) => void activityStarted.set(id, nowMs()),
  };
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: FLOOR_TASK_QUEUE,
    workflowsPath: FLOOR_WORKFLOWS_PATH,
    activities,
    // The product worker's limits (worker.ts), so neither side is throttled differently.
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 100,
    shutdownGraceTime: '3 seconds',
  });
  const run = worker.run();
  const client = new Client({ connection, namespace: opts.namespace });
  const eager = { requested: true, eagerlyStarted: 0, started: 0 };

  const turn = async (): Promise<TurnSample> => {
    const id = `bench-floor-${crypto.randomUUID()}`;
    const s: TurnSample = {
      path: 'floor',
      ok: false,
      startAt: nowMs(),
      headersMs: null,
      ttftMs: null,
      endMs: null,
      frames: 0,
      id,
      frameTimes: [],
    };
    try {
      const handle = await client.workflow.start('floorTurn', {
        taskQueue: FLOOR_TASK_QUEUE,
        workflowId: id,
        args: [{ id }],
        requestEagerStart: eager.requested,
        typedSearchAttributes: searchAttributes(),
        staticSummary: 'Bench floor turn',
        staticDetails: `workflow \`${id}\``,
      });
      eager.started += 1;
      if (handle.eagerlyStarted) eager.eagerlyStarted += 1;
      s.headersMs = nowMs() - s.startAt;
      await handle.result();
      s.endMs = nowMs() - s.startAt;
      const at = activityStarted.get(id);
      activityStarted.delete(id);
      if (at === undefined) return { ...s, error: 'the floor activity never ran' };
      return { ...s, ok: true, ttftMs: at - s.startAt };
    } catch (err) {
      return { ...s, error: (err as Error).message };
    }
  };

  return {
    client,
    turn,
    eager,
    stop: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await run.catch(() => undefined);
      await connection.close().catch(() => undefined);
    },
  };
}

/** The turn's search attributes (api/turns/start.ts sets the same keys at start), with made-up values. */
function searchAttributes() {
  const messageId = crypto.randomUUID();
  return [
    { key: SA.TenantId, value: crypto.randomUUID() },
    { key: SA.AppId, value: crypto.randomUUID() },
    { key: SA.AgentId, value: crypto.randomUUID() },
    { key: SA.ConversationId, value: crypto.randomUUID() },
    { key: SA.MessageId, value: messageId },
    { key: SA.MessageIds, value: [messageId] },
    { key: SA.InvokeFrom, value: 'service-api' },
  ];
}
