/**
 * The harness of the runAgent activity tests: the SDK's MockActivityEnvironment, a real PostgreSQL and a
 * scripted agent backend whose events the test appends (the real backend is covered by the integration tests).
 */
import crypto from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createRunAgent } from '../../activities/run-agent/index.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { emptyUsage, isTerminal, type AgentStreamEvent, type RunEvent, type Usage } from '../../core/protocol/run.js';

type Data<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>['data'];

/** The backend's run as the activity sees it: events appended by the test, streamed after a cursor. */
export class ScriptedBackend {
  readonly runId = `backend-run-${crypto.randomUUID()}`;
  readonly events: RunEvent[] = [];
  readonly cancels: { reason?: string; message?: string }[] = [];
  created = 0;
  /** false: a cancel is acknowledged but the run never confirms it (no run_cancelled). */
  confirmsCancel = true;
  /** Break the next stream (once) after it has yielded this many events. */
  breakAfter: number | null = null;
  private wake: (() => void)[] = [];

  constructor() {
    this.push({ type: 'run_started', data: {} });
  }

  push(...evs: { type: RunEvent['type']; data: unknown }[]): void {
    for (const e of evs)
      this.events.push({ id: String(this.events.length + 1), run_id: this.runId, created_at: new Date().toISOString(), ...e } as RunEvent);
    for (const w of this.wake.splice(0)) w();
  }

  delta(text: string): void {
    this.push({ type: 'agent_message_delta', data: { delta: text } });
  }

  agent(ev: AgentStreamEvent): void {
    this.push({ type: 'pydantic_ai_event', data: ev });
  }

  succeed(data: Partial<Data<'run_succeeded'>> & { output?: string }): void {
    this.push({ type: 'run_succeeded', data: { usage: usage(7), session_snapshot: { schema_version: 1, layers: [] }, ...data } });
  }

  fail(data: Data<'run_failed'>): void {
    this.push({ type: 'run_failed', data });
  }

  createRun = async (): Promise<{ run_id: string; status: 'running' }> => {
    this.created += 1;
    return { run_id: this.runId, status: 'running' };
  };

  cancelRun = async (_runId: string, body: { reason?: string; message?: string } = {}): Promise<{ ended: boolean }> => {
    this.cancels.push(body);
    if (this.confirmsCancel)
      this.push({ type: 'run_cancelled', data: { reason: body.reason, message: body.message, usage: emptyUsage() } });
    return { ended: false };
  };

  streamEvents = async function* (
    this: ScriptedBackend,
    _runId: string,
    after: string | null,
    signal?: AbortSignal,
  ): AsyncGenerator<RunEvent> {
    let i = after === null ? 0 : this.events.findIndex((e) => Number(e.id) > Number(after));
    if (i < 0) i = this.events.length;
    let yielded = 0;
    for (;;) {
      while (i < this.events.length) {
        if (this.breakAfter !== null && yielded >= this.breakAfter) {
          this.breakAfter = null;
          throw new Error('socket hang up');
        }
        const ev = this.events[i++]!;
        yielded += 1;
        yield ev;
        if (isTerminal(ev)) return;
      }
      if (signal?.aborted) return;
      await new Promise<void>((resolve) => {
        this.wake.push(resolve);
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  };
}

export function usage(completion: number, extra: Partial<Usage> = {}): Usage {
  return { ...emptyUsage(), completion_tokens: completion, total_tokens: completion, ...extra };
}

/** A conversation holding the lock of one pending message whose run request is built (prepareTurn's result). */
export async function preparedTurn(
  db: Db,
  opts: { snapshot?: unknown } = {},
): Promise<{ messageId: string; conversationId: string; bindingId: string | null }> {
  const messageId = crypto.randomUUID();
  let tenantId: string = crypto.randomUUID();
  let appId: string = crypto.randomUUID();
  let bindingId: string | null = null;
  if (opts.snapshot !== undefined) {
    // A binding needs its workspace, agent, app and tenant.
    const tenant = await db.tenant.create({ data: { name: 't' } });
    const app = await db.app.create({ data: { tenant_id: tenant.id, name: 'a' } });
    const agent = await db.agent.create({ data: { tenant_id: tenant.id, app_id: app.id, name: 'agent' } });
    const ws = await db.agentWorkspace.create({ data: { tenant_id: tenant.id, agent_id: agent.id, backend_workspace_ref: 'ws' } });
    const binding = await db.agentWorkspaceBinding.create({
      data: {
        tenant_id: tenant.id,
        app_id: app.id,
        agent_id: agent.id,
        workspace_id: ws.id,
        owner_type: 'CONVERSATION',
        owner_id: crypto.randomUUID(),
        scope_key: crypto.randomUUID(),
        session_scope_config_version_id: crypto.randomUUID(),
        config_kind: 'draft',
        home_snapshot_id: 'home-v1',
        backend_binding_ref: 'b',
        session_snapshot: opts.snapshot as object,
      },
    });
    tenantId = tenant.id;
    appId = app.id;
    bindingId = binding.id;
  }
  const conv = await db.conversation.create({
    data: { tenant_id: tenantId, app_id: appId, active_message_id: messageId, dialogue_count: 1 },
  });
  await db.message.create({
    data: { id: messageId, tenant_id: tenantId, app_id: appId, conversation_id: conv.id, query: 'hello', workflow_id: `turn-${messageId}` },
  });
  await db.agentBackendRun.create({ data: { message_id: messageId, request: { query: 'hello' }, binding_id: bindingId } });
  return { messageId, conversationId: conv.id, bindingId };
}

/** One attempt of runAgent (attempt `n`, optionally with the heartbeat details of an earlier one); `beats` records its heartbeats. */
export function attempt(deps: { db: Db; config: Config; logger: Logger }, backend: ScriptedBackend, n = 1, heartbeatDetails?: unknown) {
  const env = new MockActivityEnvironment(
    { attempt: n, heartbeatTimeoutMs: 5000, heartbeatDetails },
    { logger: new DefaultLogger('ERROR') },
  );
  const beats: { backendRunId: string | null; cursor: string | null }[] = [];
  env.on('heartbeat', (d: { backendRunId: string | null; cursor: string | null }) => beats.push(d));
  const runAgent = createRunAgent({ ...deps, backend: backend as unknown as AgentBackendClient });
  return { env, beats, run: (messageId: string) => env.run(runAgent, { messageId }) };
}

/** Resolves once a heartbeat reports this cursor committed. */
export function committed(env: MockActivityEnvironment, cursor: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (d: { cursor: string | null }) => {
      if (d.cursor === cursor) {
        env.off('heartbeat', on);
        resolve();
      }
    };
    env.on('heartbeat', on);
  });
}
