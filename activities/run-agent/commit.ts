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
import { appendEvents, commitAnswerText, commitAnswerTexts, type AnswerTextCommit } from '../../core/protocol/event-log.js';
import { isDependencyUnavailable } from '../../core/platform/dependency-errors.js';
import { timedCommit } from '../../core/platform/metrics/index.js';
import { storableText } from '../../core/platform/storable-text.js';
import { streamWindowMs, windowDelayMs } from '../../core/platform/stream-window.js';
import type { TurnMessage } from '../final-events.js';
import { keepTurnLock, releaseTurnLock } from '../../core/domain/turn/turn-lock.js';

export type Tx = Prisma.TransactionClient;

export class FencedOut extends Error {
  constructor() {
    super('another attempt advanced this turn; this one stops');
  }
}

/** Runs this process is consuming now (consume.ts counts them): the debounce window grows with it. */
export const consuming = { runs: 0 };

/**
 * Group commit of the streamed text across the runs of this process (docs/decisions/0014): while no text statement
 * is in flight a flush goes out at once, alone (`commitAnswerText`, as before); flushes that arrive while one is in
 * flight wait for it, then go out together as one statement (`commitAnswerTexts`). A flush resolves only once its
 * statement committed, with its own compare-and-set's answer.
 */
class TextCommitGroup {
  private queue: Array<AnswerTextCommit & { resolve: (ok: boolean) => void; reject: (err: unknown) => void }> = [];
  private busy = false;
  readonly stats = { statements: 0, commits: 0 };

  constructor(private readonly db: Db) {}

  commit(entry: AnswerTextCommit): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...entry, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.busy || this.queue.length === 0) return;
    const batch: typeof this.queue = [];
    const later: typeof this.queue = [];
    const seen = new Set<string>();
    for (const e of this.queue) (seen.has(e.messageId) ? later : (seen.add(e.messageId), batch)).push(e);
    this.queue = later;
    this.busy = true;
    this.stats.statements += 1;
    this.stats.commits += batch.length;
    const alone = (e: AnswerTextCommit) => timedCommit('text', () => commitAnswerText(this.db, e));
    const write: Promise<boolean[]> =
      batch.length === 1 ? alone(batch[0]!).then((ok) => [ok]) : timedCommit('text', () => commitAnswerTexts(this.db, batch));
    write
      .then(
        (oks) => batch.forEach((e, i) => e.resolve(oks[i] ?? false)),
        (err: unknown) => {
          // Rolled back as a whole for one entry's sake (a deadlock, a unique violation): each goes again, alone.
          if (batch.length > 1 && !isDependencyUnavailable(err)) for (const e of batch) alone(e).then(e.resolve, e.reject);
          else for (const e of batch) e.reject(err);
        },
      )
      .finally(() => {
        this.busy = false;
        this.pump();
      });
  }
}

const groups = new WeakMap<Db, TextCommitGroup>();

/** The text group commit of a database client (one per process and client). */
export function textCommitGroup(db: Db): TextCommitGroup {
  let g = groups.get(db);
  if (!g) groups.set(db, (g = new TextCommitGroup(db)));
  return g;
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

  /**
   * Milliseconds until the pending text is due (the debounce window, grown with the stream's age and with the runs
   * consumed here; under load it ends on a shared clock slot, so many runs' flushes go out together); null when
   * nothing is pending.
   */
  dueIn(debounceMs: number, now = Date.now(), inFlight = consuming.runs): number | null {
    if (!this.pendingText) return null;
    const windowMs = streamWindowMs(debounceMs, this.pendingFirstAt - this.streamStartedAt, inFlight);
    const delay = windowDelayMs(this.pendingFirstAt, windowMs, debounceMs, inFlight);
    return Math.max(0, this.pendingFirstAt + delay - now);
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
      await tx.$executeRaw`update messages set answer = answer || ${storableText(this.pendingText)}, updated_at = now() where id = ${this.msg.id}::uuid`;
    return events;
  }

  /** Commits the pending text. The hot path of a streamed answer: cursor CAS + answer append + event, one statement. */
  async flush(): Promise<void> {
    if (!this.pendingText || !this.pendingLastId) return;
    const [event] = this.pendingEvents();
    const newCursor = this.pendingLastId;
    const ok = await textCommitGroup(this.db).commit({
      messageId: this.msg.id,
      expectedCursor: this.cursor,
      newCursor,
      text: this.pendingText,
      event: event!,
    });
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
