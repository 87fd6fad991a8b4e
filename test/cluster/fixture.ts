/**
 * The frame of the failover tests: one `npm run cluster` topology per file (stack/cluster.ts) on ports of its
 * own — embedded PostgreSQL, the real Temporal server as four service processes, the compiled api ×2,
 * worker ×2 and agent backend ×2 behind the balancers. Before each test every process is brought back up (a
 * test kills some); after each test the fault suite's audit (test/faults/audit.ts) runs over what the test
 * created: no lost or duplicated events, thoughts or charges, client streams == stored logs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { freeClusterPorts, startCluster, type Cluster, type ClusterPorts } from '../../stack/cluster.js';
import { TEMPORAL_SERVICES } from '../../stack/temporal-server.js';
import { assertAuditClean } from '../faults/audit.js';
import type { ApiTarget, TurnStream } from '../faults/client.js';
import { step } from '../faults/harness.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface ClusterContext {
  cluster: Cluster;
  /** The api balancer and the demo app's key. */
  api: ApiTarget;
  /** One api replica directly (not through the balancer). */
  replica: (i: number) => ApiTarget & { port: number };
  track: (s: TurnStream) => TurnStream;
  withTemporal: <T>(fn: (client: Client) => Promise<T>) => Promise<T>;
  /** Brings every stopped process back up. */
  heal: () => Promise<void>;
}

export function useCluster(name: string): ClusterContext {
  const ctx = {} as ClusterContext;
  const dir = path.join(ROOT, '.data', `cluster-test-${process.pid}-${name}`);
  let streams: TurnStream[] = [];
  let since = new Date();
  let clusterPorts: ClusterPorts;
  ctx.track = (s) => {
    streams.push(s);
    return s;
  };
  ctx.withTemporal = async (fn) => {
    const connection = await Connection.connect({ address: ctx.cluster.temporalAddress, connectTimeout: '5 seconds' });
    try {
      return await fn(new Client({ connection, namespace: ctx.cluster.namespace }));
    } finally {
      await connection.close().catch(() => undefined);
    }
  };
  ctx.heal = async () => {
    const c = ctx.cluster;
    await Promise.all(TEMPORAL_SERVICES.map((s) => c.temporal[s].start()));
    await Promise.all([...c.backends, ...c.apis, ...c.workers].filter((s) => !s.up).map((s) => s.start()));
  };
  ctx.replica = (i) => ({
    apiUrl: `http://127.0.0.1:${clusterPorts.apiReplicas[i]}`,
    key: ctx.api.key,
    port: clusterPorts.apiReplicas[i]!,
  });

  beforeAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    clusterPorts = await freeClusterPorts();
    step(`${name}: starting the cluster in ${dir}`);
    ctx.cluster = await startCluster({
      dataDir: dir,
      ports: clusterPorts,
      buildDir: path.join(dir, 'build'),
      taskQueue: `agent-turns-cluster-${process.pid}`,
      env: { DEMO_MODEL_TOKEN_DELAY_MS: '5', LOG_LEVEL: process.env.CLUSTER_LOG_LEVEL ?? 'info' },
      log: (m) => step(`${name}: ${m}`),
    });
    ctx.api = { apiUrl: ctx.cluster.apiUrl, key: ctx.cluster.demo!.apiKey };
    step(`${name}: cluster up (logs in ${ctx.cluster.logDir})`);
  }, 600_000);

  afterAll(async () => {
    await ctx.cluster?.stop();
    if (!process.env.KEEP_TEST_DATA) fs.rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  beforeEach(async () => {
    await ctx.heal();
    since = new Date(Date.now() - 200);
    streams = [];
  }, 180_000);

  afterEach(async () => {
    await ctx.heal();
    step(`${name}: audit`);
    const input = {
      databaseUrl: ctx.cluster.databaseUrl,
      withTemporal: ctx.withTemporal,
      taskQueue: ctx.cluster.taskQueue,
      since,
      streams: streams.map((s) => ({ frames: s.frames })),
    };
    await assertAuditClean(input);
  }, 180_000);
  return ctx;
}

/** The worker identities (`pid@host`) that ran a workflow's tasks and activities, from its history. */
export async function identitiesOf(
  ctx: ClusterContext,
  workflowId: string,
): Promise<{ workflowTasks: string[]; activities: Record<string, string> }> {
  return ctx.withTemporal(async (client) => {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    const workflowTasks: string[] = [];
    const scheduled = new Map<string, string>();
    const activities: Record<string, string> = {};
    for (const e of history.events ?? []) {
      if (e.workflowTaskStartedEventAttributes?.identity) workflowTasks.push(e.workflowTaskStartedEventAttributes.identity);
      const s = e.activityTaskScheduledEventAttributes;
      if (s) scheduled.set(String(e.eventId), s.activityType?.name ?? '?');
      const st = e.activityTaskStartedEventAttributes;
      if (st?.identity) activities[`${scheduled.get(String(st.scheduledEventId)) ?? '?'}#${String(st.scheduledEventId)}`] = st.identity;
    }
    return { workflowTasks, activities };
  });
}

/** `pid@host` → the worker's name, for the pids the cluster's workers have (or had: pass earlier pids). */
export function workerOf(identity: string, pids: Record<number, string>): string | undefined {
  return pids[Number(identity.split('@')[0])];
}
