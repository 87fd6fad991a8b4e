/**
 * Event publishing for one run, and in-process wake-ups for event readers.
 *
 * RunEmitter serializes appends (event ids follow emission order) and coalesces text deltas into
 * `agent_message_delta` events (and thinking deltas into thinking `part_delta` events): a buffer is
 * flushed after BACKEND_DELTA_COALESCE_MS, at BACKEND_DELTA_COALESCE_CHARS, before any other event
 * and before the terminal event. The first delta of a part is not held: it is what the user waits for
 * (time to first token), so it is appended at once and coalescing starts with the second (issue 21).
 *
 * No event is ever dropped. An append that fails because PostgreSQL is unreachable is retried with
 * backoff, in order (later events wait behind it, consecutive deltas of one part merge while they
 * wait), until the run's wall-clock deadline; the terminal event gets a further grace. If the
 * deadline passes (or the store rejects an event outright), nothing more is appended but the
 * terminal, which becomes `run_failed` with reason `event_store_unavailable` (`event_store_error`):
 * the log may end early, but it never has a gap. Retried appends are idempotent (the store checks
 * the expected sequence number), so an append whose answer was lost is not written twice.
 */
import type { Logger } from '../core/platform/logger.js';
import type { RunEventType } from '../core/protocol/run.js';
import { isConnectionError, type OwnedAppend, type PgRunStore, type StoredEvent, type TerminalUpdate } from './store.js';
import { recordBackendRunEnded } from '../core/platform/metrics/index.js';
import { streamWindowMs, windowDelayMs } from '../core/platform/stream-window.js';

type DeltaKind = 'text' | 'thinking';
type TerminalType = 'run_succeeded' | 'run_failed' | 'run_cancelled';

export interface CoalesceOptions {
  ms: number;
  chars: number;
  /** Runs streaming in this process now: the window grows with it (core/platform/stream-window.ts loadFactor). */
  inFlight?: () => number;
}

/** What an emitter appends through: the store itself, or the process's GroupAppender. */
export type EventWriter = Pick<PgRunStore, 'appendEvent'>;

export interface AppendRetryOptions {
  /** Epoch ms after which a failing (non-terminal) append is given up: the run's wall-clock deadline. */
  deadline: number;
  /** Extra time the terminal append keeps retrying after the deadline (default 120 s). */
  terminalGraceMs?: number;
  /** Backoff between attempts: doubles from `baseMs` up to `maxMs` (defaults 100 ms / 2 s). */
  baseMs?: number;
  maxMs?: number;
}

export interface EmitterHooks {
  onAppended: (runId: string, seq: number) => void;
  onRunEndedElsewhere: () => void;
  /** The event log cannot be continued without a gap: the run should stop (its terminal says why). */
  onStoreFailed?: (reason: 'event_store_unavailable' | 'event_store_error') => void;
}

interface QueuedEvent {
  type: RunEventType;
  data: unknown;
  update?: TerminalUpdate;
  delta?: { kind: DeltaKind; index: number; text: string };
  waiters: Array<(stored: StoredEvent | null) => void>;
}

export class RunEmitter {
  private readonly queue: QueuedEvent[] = [];
  private writer: Promise<void> | null = null;
  private pending: { kind: DeltaKind; index: number; text: string } | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** The part the last delta belonged to; null after any other event (the next delta starts a new part). */
  private lastPart: { kind: DeltaKind; index: number } | null = null;
  /** When the current part's first delta arrived: the coalescing window grows with the part's age (core/platform/stream-window.ts). */
  private partStartedAt = 0;
  /** Set once the store refuses appends (the run ended elsewhere) or the emitter is detached. */
  private stopped = false;
  /** Set once an event could not be stored: only the terminal may follow (as run_failed). */
  private failed: 'event_store_unavailable' | 'event_store_error' | null = null;
  /** The sequence number the next stored event gets (a new run starts empty). */
  private nextSeq = 1;
  private wakeSleep: (() => void) | null = null;
  private readonly retry: Required<AppendRetryOptions>;

  constructor(
    private readonly store: EventWriter,
    readonly runId: string,
    private readonly coalesce: CoalesceOptions,
    private readonly hooks: EmitterHooks,
    private readonly logger: Logger,
    retry: AppendRetryOptions = { deadline: Date.now() + 600_000 },
  ) {
    this.retry = { terminalGraceMs: 120_000, baseMs: 100, maxMs: 2_000, ...retry };
  }

  /** Buffers a text/thinking delta (coalesced). */
  delta(kind: DeltaKind, index: number, text: string): void {
    if (!text || this.stopped) return;
    const firstOfPart = this.lastPart?.kind !== kind || this.lastPart.index !== index;
    this.lastPart = { kind, index };
    if (firstOfPart) this.partStartedAt = Date.now();
    if (this.pending && (this.pending.kind !== kind || this.pending.index !== index)) this.flushPending();
    if (!this.pending) this.pending = { kind, index, text: '' };
    this.pending.text += text;
    if (firstOfPart || this.pending.text.length >= this.coalesce.chars) this.flushPending();
    else if (!this.timer) {
      const now = Date.now();
      const inFlight = this.coalesce.inFlight?.() ?? 1;
      const windowMs = streamWindowMs(this.coalesce.ms, now - this.partStartedAt, inFlight);
      // Under load the window ends on a shared clock slot: many runs' deltas fall due together (one INSERT).
      this.timer = setTimeout(() => this.flushPending(), windowDelayMs(now, windowMs, this.coalesce.ms, inFlight));
    }
  }

  /** Appends a non-delta event after flushing buffered deltas; resolves once stored (null: not stored). */
  event(type: Exclude<RunEventType, TerminalType>, data: unknown): Promise<StoredEvent | null> {
    this.flushPending();
    this.lastPart = null;
    return this.enqueue({ type, data, waiters: [] });
  }

  /** Appends the terminal event (first terminal wins in the store). Returns false if the run had already ended. */
  async terminal(type: TerminalType, data: unknown, update: TerminalUpdate): Promise<boolean> {
    this.flushPending();
    const stored = await this.enqueue({ type, data, update, waiters: [] });
    if (stored !== null) recordBackendRunEnded(type);
    this.stopped = true;
    return stored !== null;
  }

  /** Why the log could not be continued, if it could not. */
  get storeFailure(): 'event_store_unavailable' | 'event_store_error' | null {
    return this.failed;
  }

  /** Waits for every queued append. */
  async drain(): Promise<void> {
    this.flushPending();
    while (this.writer) await this.writer;
  }

  /** Stops writing (crash simulation / shutdown without terminal). */
  detach(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
    this.wakeSleep?.();
  }

  private flushPending(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const p = this.pending;
    this.pending = null;
    if (!p || this.stopped) return;
    void this.enqueue({ type: p.kind === 'text' ? 'agent_message_delta' : 'pydantic_ai_event', data: null, delta: p, waiters: [] });
  }

  private enqueue(item: QueuedEvent): Promise<StoredEvent | null> {
    return new Promise((resolve) => {
      item.waiters.push(resolve);
      this.queue.push(item);
      this.writer ??= this.writeAll();
    });
  }

  private async writeAll(): Promise<void> {
    for (;;) {
      const item = this.queue.shift();
      if (!item) {
        // Cleared in the same tick the queue is seen empty, so an enqueue right after starts a writer.
        this.writer = null;
        return;
      }
      // Deltas that piled up behind a slow (retrying) append merge into one event.
      while (item.delta && this.queue[0]?.delta && item.delta.text.length < this.coalesce.chars) {
        const next = this.queue[0].delta;
        if (next.kind !== item.delta.kind || next.index !== item.delta.index) break;
        item.delta = { ...item.delta, text: item.delta.text + next.text };
        item.waiters.push(...this.queue.shift()!.waiters);
      }
      let stored: StoredEvent | null = null;
      try {
        stored = await this.write(item);
      } catch (err) {
        this.logger.error({ err, runId: this.runId, type: item.type }, 'agent backend: event append failed');
      }
      for (const w of item.waiters) w(stored);
    }
  }

  private async write(item: QueuedEvent): Promise<StoredEvent | null> {
    if (this.stopped) return null;
    let { type, data, update } = item;
    if (item.delta) {
      data =
        item.delta.kind === 'text'
          ? { delta: item.delta.text }
          : { event_kind: 'part_delta', index: item.delta.index, delta: { part_delta_kind: 'thinking', content_delta: item.delta.text } };
    }
    if (this.failed) {
      if (!update) return null; // after a lost event only the terminal may follow
      ({ type, data, update } = failedTerminal(this.failed, data));
    }
    const deadline = update ? Math.max(this.retry.deadline, Date.now()) + this.retry.terminalGraceMs : this.retry.deadline;
    let delay = this.retry.baseMs;
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) return null; // detached while waiting to retry
      try {
        const stored = await this.store.appendEvent(this.runId, type, data, update, { expectedSeq: this.nextSeq });
        if (stored) {
          this.nextSeq = Number(stored.id) + 1;
          if (attempt > 1) this.logger.info({ runId: this.runId, type, attempts: attempt }, 'agent backend: event stored after retries');
          this.hooks.onAppended(this.runId, Number(stored.id));
        } else if (!update) {
          // The run ended without us (reaped as stale, or a terminal raced): stop the task.
          this.stopped = true;
          this.hooks.onRunEndedElsewhere();
        }
        return stored;
      } catch (err) {
        if (this.stopped) return null;
        const transient = isConnectionError(err);
        if (!transient || Date.now() + delay > deadline) {
          if (update) {
            this.logger.error({ err, runId: this.runId, type, attempts: attempt }, 'agent backend: the terminal event could not be stored');
            return null;
          }
          this.failed = transient ? 'event_store_unavailable' : 'event_store_error';
          this.logger.error(
            { err, runId: this.runId, type, attempts: attempt },
            'agent backend: an event could not be stored; failing the run',
          );
          this.hooks.onStoreFailed?.(this.failed);
          return null;
        }
        if (attempt === 1) this.logger.warn({ err, runId: this.runId, type }, 'agent backend: event append failed, retrying');
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, delay);
          function done() {
            clearTimeout(t);
            resolve();
          }
          this.wakeSleep = done;
        });
        this.wakeSleep = null;
        delay = Math.min(delay * 2, this.retry.maxMs);
      }
    }
  }
}

/**
 * Group commit across runs (docs/decisions/0014). Every emitter of the process appends through one GroupAppender:
 * while no group statement is in flight, an append goes out at once, alone, as today's statement (a run alone waits
 * for nothing); while one is in flight, the appends that arrive meanwhile wait for it and then go out together, one
 * statement for all their runs (`PgRunStore.appendOwnedEvents`). So the batch grows exactly as the writer falls
 * behind. An append is acknowledged (its promise resolves) only once its statement has committed; every rule of a
 * single append holds per run (the expected sequence number, the first terminal wins, the retry of an append whose
 * answer was lost finds its own event). A run has at most one append in flight (its emitter writes in order); a
 * second one waits for the next statement. Appends without `expectedSeq` (the reaper's) go straight to the store.
 */
export class GroupAppender implements EventWriter {
  private queue: Array<OwnedAppend & { resolve: (s: StoredEvent | null) => void; reject: (err: unknown) => void }> = [];
  private busy = false;
  /** Statements sent and appends they carried (a test and the decision record read them). */
  readonly stats = { statements: 0, appends: 0 };

  constructor(private readonly store: Pick<PgRunStore, 'appendEvent' | 'appendOwnedEvents'>) {}

  appendEvent(
    runId: string,
    type: string,
    data: unknown,
    terminal?: TerminalUpdate,
    opts: { staleAfterMs?: number; expectedSeq?: number } = {},
  ): Promise<StoredEvent | null> {
    const expectedSeq = opts.expectedSeq;
    if (expectedSeq === undefined || opts.staleAfterMs !== undefined) return this.store.appendEvent(runId, type, data, terminal, opts);
    return new Promise((resolve, reject) => {
      this.queue.push({ runId, type, data, terminal, expectedSeq, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.busy || this.queue.length === 0) return;
    const batch: typeof this.queue = [];
    const later: typeof this.queue = [];
    const runs = new Set<string>();
    for (const e of this.queue) (runs.has(e.runId) ? later : (runs.add(e.runId), batch)).push(e);
    this.queue = later;
    this.busy = true;
    this.stats.statements += 1;
    this.stats.appends += batch.length;
    const e0 = batch[0]!;
    const write: Promise<Array<StoredEvent | null>> =
      batch.length === 1
        ? this.store.appendEvent(e0.runId, e0.type, e0.data, e0.terminal, { expectedSeq: e0.expectedSeq }).then((s) => [s])
        : this.store.appendOwnedEvents(batch);
    write
      .then(
        (stored) => batch.forEach((e, i) => e.resolve(stored[i] ?? null)),
        (err: unknown) => {
          // A deadlock or serialization failure rolled the whole statement back: each append goes again, alone.
          if (batch.length > 1 && isRetryableConflict(err)) {
            for (const e of batch)
              this.store.appendEvent(e.runId, e.type, e.data, e.terminal, { expectedSeq: e.expectedSeq }).then(e.resolve, e.reject);
          } else for (const e of batch) e.reject(err);
        },
      )
      .finally(() => {
        this.busy = false;
        this.pump();
      });
  }
}

function isRetryableConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** The terminal of a run whose log could not be continued: `run_failed`, keeping usage/snapshot/output. */
function failedTerminal(reason: 'event_store_unavailable' | 'event_store_error', data: unknown) {
  const d = (data ?? {}) as { session_snapshot?: unknown; usage?: unknown; output?: unknown };
  const error =
    reason === 'event_store_unavailable'
      ? 'the run could not store its events: PostgreSQL was unreachable for longer than the run may take'
      : 'the run could not store one of its events';
  return {
    type: 'run_failed' as const,
    data: { error, error_type: null, reason, session_snapshot: d.session_snapshot ?? null, usage: d.usage ?? null, output: d.output ?? '' },
    update: { status: 'failed' as const, error },
  };
}

/**
 * In-process wake-ups for readers waiting on a run's events (fed by NOTIFY and local appends). A wake may carry the
 * seq it announces: a reader whose cursor is already there ignores it. A locally appended event arrives twice (the
 * append's own wake and its NOTIFY), and a reader that read a batch is woken once per event of it; without the seq
 * each of those became an empty read plus a status read (issue 21: 27 of a streamed turn's ~75 backend statements).
 */
export class EventHub {
  private readonly subs = new Map<string, Set<(seq?: number) => void>>();

  notify(runId: string, seq?: number): void {
    for (const wake of this.subs.get(runId) ?? []) wake(seq);
  }

  /** Wakes every reader (after a reconnect: each re-reads from its cursor). */
  notifyAll(): void {
    for (const set of this.subs.values()) for (const wake of set) wake();
  }

  /**
   * A waiter that never misses a notification between two waits. `wait(timeoutMs, cursor)` resolves on a wake that
   * may bring an event past `cursor` (one without a seq always may), or after `timeoutMs`.
   */
  subscribe(runId: string): { wait(timeoutMs: number, cursor?: number): Promise<void>; close(): void } {
    // Since the last wait: the highest seq announced (-1: none; Infinity: a wake without a seq).
    let upTo = -1;
    let pending: { cursor: number; done: () => void } | null = null;
    const wake = (seq?: number) => {
      upTo = Math.max(upTo, seq ?? Infinity);
      if (pending && upTo > pending.cursor) pending.done();
    };
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    set.add(wake);
    return {
      wait: (timeoutMs, cursor = -1) =>
        new Promise<void>((res) => {
          const done = () => {
            clearTimeout(t);
            pending = null;
            upTo = -1;
            res();
          };
          const due = upTo > cursor;
          // Wakes for events the caller already read are spent either way.
          upTo = -1;
          if (due) {
            res();
            return;
          }
          const t = setTimeout(done, timeoutMs);
          pending = { cursor, done };
        }),
      close: () => {
        pending?.done();
        set.delete(wake);
        if (set.size === 0) this.subs.delete(runId);
      },
    };
  }
}
