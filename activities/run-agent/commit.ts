/**
 * Exactly-once without trusting the worker: every batch of effects (event-log rows, thought rows, answer
 * text, terminal bookkeeping) commits in one transaction together with the run's consumption cursor, fenced
 * by compare-and-set on that cursor. An attempt that finds the cursor moved was overtaken by another one and
 * stops (FencedOut). Text deltas wait here, uncommitted, until the debounce window closes (`flush`); an
 * attempt that ends without flushing loses nothing: the next one re-reads them from the committed cursor.
 */
import type { Db, Prisma } from '../../core/platform/db.js';
import type { NewClientEvent } from '../../core/protocol/client-events.js';
import { turnEventBase } from '../../core/protocol/client-events.js';
import { appendEvents, commitAnswerText } from '../../core/protocol/event-log.js';
import { timedCommit } from '../../core/platform/metrics/index.js';
import { streamWindowMs } from '../../core/platform/stream-window.js';
import type { TurnMessage } from '../final-events.js';
import { keepTurnLock, releaseTurnLock } from '../turn-lock.js';

export type Tx = Prisma.TransactionClient;

export class FencedOut extends Error {
  constructor() {
    super('another attempt advanced this turn; this one stops');
  }
}

export class RunCommitter {
  /** The last backend event id whose effects are committed (exclusive resume cursor). */
  cursor: string | null;
  /** The answer text committed so far. */
  private answer: string;
  private pendingText = '';
  private pendingFirstAt = 0;
  private pendingLastId: string | null = null;
  /** When this attempt first saw answer text: the debounce window grows with the stream's age (core/platform/stream-window.ts). */
  private streamStartedAt = 0;
  /**
   * Bookkeeping that rides with the next commit instead of a transaction of its own (a model request's usage row):
   * written in whichever commit moves the cursor past its event next, so a lost attempt re-reads and re-defers it.
   */
  private deferred: ((tx: Tx) => Promise<unknown>)[] = [];

  constructor(
    private readonly db: Db,
    private readonly msg: TurnMessage,
    committed: { cursor: string | null; answer: string },
    /** Called after each commit that moved the cursor (the attempt heartbeats it). */
    private readonly onCommitted: (cursor: string) => void,
  ) {
    this.cursor = committed.cursor;
    this.answer = committed.answer;
  }

  /** The answer as streamed so far, committed or not. */
  get streamedAnswer(): string {
    return this.answer + this.pendingText;
  }

  /** Nothing of the answer is committed yet: its first text goes out at once (time to first token). */
  get noAnswerYet(): boolean {
    return this.answer === '';
  }

  addDelta(eventId: string, text: string, now = Date.now()): void {
    if (!this.streamStartedAt) this.streamStartedAt = now;
    if (!this.pendingText) this.pendingFirstAt = now;
    this.pendingText += text;
    this.pendingLastId = eventId;
  }

  /** Milliseconds until the pending text is due (the debounce window, grown with the stream's age); null when nothing is pending. */
  dueIn(debounceMs: number, now = Date.now()): number | null {
    if (!this.pendingText) return null;
    const windowMs = streamWindowMs(debounceMs, this.pendingFirstAt - this.streamStartedAt);
    return Math.max(0, this.pendingFirstAt + windowMs - now);
  }

  /** The pending text, then the effects, with the cursor CAS in one transaction. */
  async commit(newCursor: string, build: (tx: Tx) => Promise<NewClientEvent[]>): Promise<void> {
    await timedCommit('batch', () =>
      this.db.$transaction(async (tx) => {
        const n = await tx.$executeRaw`update agent_backend_runs set cursor = ${newCursor}, updated_at = now()
        where message_id = ${this.msg.id}::uuid and cursor is not distinct from ${this.cursor}`;
        if (n !== 1) throw new FencedOut();
        await this.writeDeferred(tx);
        await appendEvents(tx, this.msg.id, [...(await this.writePendingText(tx)), ...(await build(tx))]);
      }),
    );
    this.cursor = newCursor;
    this.clearPending();
    this.onCommitted(newCursor);
  }

  /** Adds a write to the next commit (see `deferred`). */
  defer(write: (tx: Tx) => Promise<unknown>): void {
    this.deferred.push(write);
  }

  private async writeDeferred(tx: Tx): Promise<void> {
    for (const write of this.deferred) await write(tx);
  }

  /**
   * The run's end: effects, cursor and terminal type in one transaction. The turn is over for the client the
   * moment its terminal event is visible, so the conversation's lock goes in the same transaction (a paused
   * turn keeps it: the form holds the conversation).
   */
  async commitTerminal(newCursor: string | null, type: string, build: (tx: Tx) => Promise<NewClientEvent[]>): Promise<void> {
    await timedCommit('terminal', () =>
      this.db.$transaction(async (tx) => {
        const n =
          await tx.$executeRaw`update agent_backend_runs set cursor = ${newCursor ?? this.cursor}, terminal_type = ${type}, status = 'ended', updated_at = now()
        where message_id = ${this.msg.id}::uuid and cursor is not distinct from ${this.cursor} and terminal_type is null`;
        if (n !== 1) throw new FencedOut();
        await this.writeDeferred(tx);
        await appendEvents(tx, this.msg.id, await build(tx));
        if (type === 'deferred_tool_call') await keepTurnLock(tx, this.msg.conversation_id, this.msg.id);
        else await releaseTurnLock(tx, this.msg.conversation_id, this.msg.id);
      }),
    );
    if (newCursor) this.cursor = newCursor;
    this.clearPending();
  }

  /** The pending text as one `agent_message` event (keyed by its last backend event), if any. */
  pendingEvents(): NewClientEvent[] {
    if (!this.pendingText) return [];
    const data = { ...turnEventBase(this.msg), event: 'agent_message' as const, id: this.msg.id, answer: this.pendingText };
    return [{ event: 'agent_message', sourceKey: `be:${this.pendingLastId}:agent_message`, data }];
  }

  /** Appends the pending text to the stored answer (inside a commit) and returns its event. */
  async writePendingText(tx: Tx): Promise<NewClientEvent[]> {
    const events = this.pendingEvents();
    if (this.pendingText)
      await tx.$executeRaw`update messages set answer = answer || ${this.pendingText}, updated_at = now() where id = ${this.msg.id}::uuid`;
    return events;
  }

  /** Commits the pending text. The hot path of a streamed answer: cursor CAS + answer append + event, one statement. */
  async flush(): Promise<void> {
    if (!this.pendingText || !this.pendingLastId) return;
    const [event] = this.pendingEvents();
    const newCursor = this.pendingLastId;
    const ok = await timedCommit('text', () =>
      commitAnswerText(this.db, {
        messageId: this.msg.id,
        expectedCursor: this.cursor,
        newCursor,
        text: this.pendingText,
        event: event!,
      }),
    );
    if (!ok) throw new FencedOut();
    this.cursor = newCursor;
    this.clearPending();
    this.onCommitted(newCursor);
  }

  private clearPending(): void {
    this.deferred = [];
    this.answer += this.pendingText;
    this.pendingText = '';
    this.pendingLastId = null;
    this.pendingFirstAt = 0;
  }
}
