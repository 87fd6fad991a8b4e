/**
 * Event publishing for one run, and in-process wake-ups for event readers.
 *
 * RunEmitter serializes appends (event ids follow emission order) and coalesces text deltas into
 * `agent_message_delta` events (and thinking deltas into thinking `part_delta` events): a buffer is
 * flushed after BACKEND_DELTA_COALESCE_MS, at BACKEND_DELTA_COALESCE_CHARS, before any other event
 * and before the terminal event.
 */
import type { Logger } from '../core/logger.js';
import type { RunEventType } from '../core/protocol/run.js';
import type { PgRunStore, StoredEvent, TerminalUpdate } from './store.js';

type DeltaKind = 'text' | 'thinking';

export interface CoalesceOptions {
  ms: number;
  chars: number;
}

export class RunEmitter {
  private chain: Promise<unknown> = Promise.resolve();
  private pending: { kind: DeltaKind; index: number; text: string } | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Set once the store refuses appends (the run ended elsewhere) or the emitter is detached. */
  private stopped = false;

  constructor(
    private readonly store: PgRunStore,
    readonly runId: string,
    private readonly coalesce: CoalesceOptions,
    private readonly hooks: { onAppended: (runId: string) => void; onRunEndedElsewhere: () => void },
    private readonly logger: Logger,
  ) {}

  /** Buffers a text/thinking delta (coalesced). */
  delta(kind: DeltaKind, index: number, text: string): void {
    if (!text || this.stopped) return;
    if (this.pending && (this.pending.kind !== kind || this.pending.index !== index)) this.flushPending();
    if (!this.pending) this.pending = { kind, index, text: '' };
    this.pending.text += text;
    if (this.pending.text.length >= this.coalesce.chars) this.flushPending();
    else if (!this.timer) this.timer = setTimeout(() => this.flushPending(), this.coalesce.ms);
  }

  /** Appends a non-delta event after flushing buffered deltas; resolves once stored. */
  event(type: Exclude<RunEventType, 'run_succeeded' | 'run_failed' | 'run_cancelled'>, data: unknown): Promise<StoredEvent | null> {
    this.flushPending();
    return this.enqueue(type, data);
  }

  /** Appends the terminal event (first terminal wins in the store). Returns false if the run had already ended. */
  async terminal(type: 'run_succeeded' | 'run_failed' | 'run_cancelled', data: unknown, update: TerminalUpdate): Promise<boolean> {
    this.flushPending();
    const stored = await this.enqueue(type, data, update);
    this.stopped = true;
    return stored !== null;
  }

  /** Waits for every queued append. */
  async drain(): Promise<void> {
    this.flushPending();
    await this.chain.catch(() => undefined);
  }

  /** Stops writing (crash simulation / shutdown without terminal). */
  detach(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
  }

  private flushPending(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const p = this.pending;
    this.pending = null;
    if (!p || this.stopped) return;
    if (p.kind === 'text') void this.enqueue('agent_message_delta', { delta: p.text }).catch(() => undefined);
    else {
      void this.enqueue('pydantic_ai_event', {
        event_kind: 'part_delta',
        index: p.index,
        delta: { part_delta_kind: 'thinking', content_delta: p.text },
      }).catch(() => undefined);
    }
  }

  private enqueue(type: RunEventType, data: unknown, update?: TerminalUpdate): Promise<StoredEvent | null> {
    const next = this.chain.then(async () => {
      if (this.stopped) return null;
      const stored = await this.store.appendEvent(this.runId, type, data, update);
      if (stored) this.hooks.onAppended(this.runId);
      else if (!update) {
        // The run ended without us (reaped as stale, or a terminal raced): stop the task.
        this.stopped = true;
        this.hooks.onRunEndedElsewhere();
      }
      return stored;
    });
    this.chain = next.catch((err) => this.logger.error({ err, runId: this.runId, type }, 'agent backend: event append failed'));
    return next;
  }
}

/** In-process wake-ups for readers waiting on a run's events (fed by NOTIFY and local appends). */
export class EventHub {
  private readonly subs = new Map<string, Set<() => void>>();

  notify(runId: string): void {
    for (const wake of this.subs.get(runId) ?? []) wake();
  }

  /** A waiter that never misses a notification between two waits. */
  subscribe(runId: string): { wait(timeoutMs: number): Promise<void>; close(): void } {
    let dirty = false;
    let resolve: (() => void) | null = null;
    const wake = () => {
      dirty = true;
      resolve?.();
    };
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    set.add(wake);
    return {
      wait: (timeoutMs) =>
        new Promise<void>((res) => {
          if (dirty) {
            dirty = false;
            res();
            return;
          }
          const t = setTimeout(done, timeoutMs);
          function done() {
            clearTimeout(t);
            resolve = null;
            dirty = false;
            res();
          }
          resolve = done;
        }),
      close: () => {
        resolve?.();
        set.delete(wake);
        if (set.size === 0) this.subs.delete(runId);
      },
    };
  }
}
