/**
 * The runs this process owns: starts their tasks, enforces the wall-clock limit, delivers cancel
 * requests (local, via NOTIFY from other replicas, or via the heartbeat poll), heartbeats, fails runs
 * whose owner process stopped heartbeating (`backend_restarted`) and deletes expired runs.
 *
 * Owner liveness vs. "the database was away": a heartbeat that fails because PostgreSQL is
 * unreachable says nothing about the owner, so a run is reaped only when its heartbeat is older than
 * the grace (`staleAfterMs`) measured over time during which both the database was up
 * (`pg_postmaster_start_time()`, in the store's query) and this reaper could reach it without
 * interruption (`store.reachableForMs()`): a reaper that just reconnected, or a database that just
 * restarted, waits a full grace before judging anyone. An owner whose queries succeed again
 * refreshes its heartbeat first thing (`onStoreReconnected`), well inside that grace.
 */
import type { Logger } from '../core/platform/logger.js';
import type { RunPlan } from './composition.js';
import type { AbortCause } from './errors.js';
import { EventHub, GroupAppender, RunEmitter, type CoalesceOptions } from './events.js';
import type { ModelCaller } from './model/inner-llm-model.js';
import type { PluginToolResolver } from './modules/types.js';
import { executeRun } from './run-task.js';
import { isConnectionError, type PgRunStore, type RunRow } from './store.js';

/** How long a graceful shutdown waits for its runs' terminal events (e.g. while PostgreSQL is away). */
const SHUTDOWN_GRACE_MS = 15_000;

export interface RunManagerOptions {
  instanceId: string;
  coalesce: CoalesceOptions;
  heartbeatMs: number;
  staleAfterMs: number;
  reapIntervalMs: number;
  retentionHours: number;
  retentionIntervalMs: number;
}

interface ActiveRun {
  controller: AbortController;
  emitter: RunEmitter;
  done: Promise<void>;
}

export class RunManager {
  private readonly active = new Map<string, ActiveRun>();
  /** Runs whose create is in flight here (inserted, not yet started): never adopted as orphans. */
  private readonly creating = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  /** Every run's appends go through one group commit (docs/decisions/0014). */
  readonly appender: GroupAppender;

  constructor(
    private readonly store: PgRunStore,
    readonly hub: EventHub,
    private readonly modelCaller: ModelCaller,
    private readonly toolResolver: PluginToolResolver,
    private readonly logger: Logger,
    readonly options: RunManagerOptions,
  ) {
    this.appender = new GroupAppender(store);
  }

  get activeRunIds(): string[] {
    return [...this.active.keys()];
  }

  start(runId: string, plan: RunPlan): void {
    const controller = new AbortController();
    const emitter = new RunEmitter(
      this.appender,
      runId,
      // The coalescing window grows with the runs streaming here (core/platform/stream-window.ts loadFactor).
      { ...this.options.coalesce, inFlight: () => this.active.size },
      {
        onAppended: (id, seq) => this.hub.notify(id, seq),
        onRunEndedElsewhere: () => controller.abort({ kind: 'abandon' } satisfies AbortCause),
        onStoreFailed: (reason) => {
          if (!controller.signal.aborted) controller.abort({ kind: 'store_failed', reason } satisfies AbortCause);
        },
      },
      this.logger,
      // Appends ride through a database outage for as long as the run may take.
      { deadline: Date.now() + plan.limits.maxWallClockMs },
    );
    const limitMs = plan.limits.maxWallClockMs;
    const timer = setTimeout(() => controller.abort({ kind: 'timeout', limitMs } satisfies AbortCause), limitMs);
    const done = executeRun({
      runId,
      plan,
      emitter,
      signal: controller.signal,
      modelCaller: this.modelCaller,
      toolResolver: this.toolResolver,
      logger: this.logger.child({ runId }),
    })
      .catch((err) => this.logger.error({ err, runId }, 'agent backend: run task crashed'))
      .finally(async () => {
        clearTimeout(timer);
        await emitter.drain();
        this.active.delete(runId);
      });
    this.active.set(runId, { controller, emitter, done });
  }

  /** Marks a run id as being created here until `done` settles (see `adoptIfUnstarted`). */
  async creatingRun<T>(runId: string, done: () => Promise<T>): Promise<T> {
    this.creating.add(runId);
    try {
      return await done();
    } finally {
      this.creating.delete(runId);
    }
  }

  /**
   * A repeated create (same idempotency key) found `run`: if nobody executes it — its creator's insert committed but the
   * answer was lost (a dropped database connection), so no task was started — take it over and start it now, instead
   * of leaving it to the reaper (issue 30). A run with any event, or one owned by a live process, is left alone.
   * Returns true when this process now runs it.
   */
  async adoptIfUnstarted(run: RunRow, plan: RunPlan): Promise<boolean> {
    if (run.status !== 'running' || run.last_seq !== 0 || this.active.has(run.run_id) || this.creating.has(run.run_id)) return false;
    const mine = run.owner_id === this.options.instanceId;
    // Another owner's lease is judged like the reaper judges it: only after a full grace of reaching the database.
    if (!mine && this.store.reachableForMs() < this.options.staleAfterMs) return false;
    // Two repeated creates here at once: one adopts (the statement fences other processes, this set this one).
    return this.creatingRun(run.run_id, async () => {
      const adopted = await this.store.adoptUnstartedRun(run.run_id, this.options.instanceId, this.options.staleAfterMs);
      if (!adopted || this.active.has(run.run_id)) return false;
      this.logger.warn({ runId: run.run_id, previous_owner: run.owner_id }, 'agent backend: started a run whose create answer was lost');
      this.start(run.run_id, plan);
      return true;
    });
  }

  /** Aborts a run this process owns; false when it runs elsewhere (or not at all). */
  cancelLocal(runId: string, reason: string | null, message: string | null): boolean {
    const run = this.active.get(runId);
    if (!run) return false;
    if (!run.controller.signal.aborted) {
      run.controller.abort({ kind: 'cancel', reason: reason ?? undefined, message: message ?? undefined } satisfies AbortCause);
    }
    return true;
  }

  /** A cancel recorded by another replica (NOTIFY or heartbeat poll). */
  async onRemoteCancel(runId: string): Promise<void> {
    const run = this.active.get(runId);
    if (!run || run.controller.signal.aborted) return;
    const row = await this.store.getRun(runId);
    if (row?.cancel_requested) this.cancelLocal(runId, row.cancel_reason, row.cancel_message);
  }

  /** Starts heartbeat, stale-run reaping and retention; reaps once right away. */
  startBackground(): void {
    const every = (ms: number, fn: () => Promise<void>) => {
      // One tick at a time: a slow round (a database outage's connect timeout) is not stacked behind by the next ones.
      let busy = false;
      // While PostgreSQL is away these fail on every tick; the store logs the outage once.
      const t = setInterval(() => {
        if (busy) return;
        busy = true;
        void fn()
          .catch((err) =>
            isConnectionError(err)
              ? this.logger.debug({ err }, 'agent backend: background task skipped, database unreachable')
              : this.logger.warn({ err }, 'agent backend: background task failed'),
          )
          .finally(() => (busy = false));
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.options.heartbeatMs, () => this.heartbeat());
    every(this.options.reapIntervalMs, async () => void (await this.reapStale()));
    every(this.options.retentionIntervalMs, () => this.deleteExpired());
    void this.reapStale().catch((err) => this.logger.warn({ err }, 'agent backend: reaping stale runs failed'));
    void this.deleteExpired().catch((err) => this.logger.warn({ err }, 'agent backend: retention failed'));
  }

  /**
   * The database answers again after an outage (or LISTEN was re-subscribed): refresh our heartbeats
   * before anything else, deliver cancels recorded meanwhile, and wake every SSE follower so it
   * re-reads from its cursor (a NOTIFY sent during the outage is lost).
   */
  async onStoreReconnected(): Promise<void> {
    try {
      await this.heartbeat();
    } catch (err) {
      this.logger.warn({ err }, 'agent backend: heartbeat after reconnect failed');
    }
    this.hub.notifyAll();
  }

  async heartbeat(): Promise<void> {
    const rows = await this.store.heartbeat(this.options.instanceId, this.activeRunIds);
    for (const r of rows) if (r.cancelRequested) await this.onRemoteCancel(r.runId);
  }

  /** Ends runs nobody heartbeats any more with `run_failed` reason `backend_restarted`. */
  async reapStale(): Promise<string[]> {
    // Our side of the liveness rule: judge only after a full grace of uninterrupted reachability.
    if (this.store.reachableForMs() < this.options.staleAfterMs) return [];
    const ids = await this.store.findStaleRuns(this.options.staleAfterMs);
    const reaped: string[] = [];
    for (const runId of ids) {
      if (this.active.has(runId)) continue; // ours and alive: its heartbeat is just late
      const error = 'the agent backend process running this run stopped before it finished';
      const stored = await this.store.appendEvent(
        runId,
        'run_failed',
        { error, error_type: null, reason: 'backend_restarted', session_snapshot: null, usage: null },
        { status: 'failed', error },
        { staleAfterMs: this.options.staleAfterMs },
      );
      if (stored) {
        reaped.push(runId);
        this.hub.notify(runId);
        this.logger.warn({ runId }, 'agent backend: failed a run whose owner stopped (backend_restarted)');
      }
    }
    return reaped;
  }

  async deleteExpired(): Promise<void> {
    const n = await this.store.deleteExpired(this.options.retentionHours);
    if (n) this.logger.info({ deleted: n }, 'agent backend: deleted expired runs');
  }

  /**
   * Stops the background work. `graceful`: running runs end with `run_failed` reason
   * `backend_restarted` (snapshot included). `abandon`: nothing more is written — a crash, as the
   * restart path (another process reaping the stale runs) sees it.
   */
  async shutdown(mode: 'graceful' | 'abandon' = 'graceful'): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    const runs = [...this.active.values()];
    for (const r of runs) {
      if (mode === 'abandon') r.emitter.detach();
      if (!r.controller.signal.aborted) r.controller.abort({ kind: mode === 'abandon' ? 'abandon' : 'shutdown' } satisfies AbortCause);
    }
    // Terminals wait for PostgreSQL if it is away; a stopping process does not wait for it forever:
    // what it could not write, a peer's reaper ends later (backend_restarted, which is then true).
    let timer: NodeJS.Timeout | undefined;
    const all = Promise.all(runs.map((r) => r.done));
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_GRACE_MS)))]);
    clearTimeout(timer);
    for (const r of runs) r.emitter.detach();
    await all;
  }
}
