/** Serves a turn's events from the event log as text/event-stream (any replica, resumable). */
import type { Request, Response } from 'express';
import type { Db } from '../../core/platform/db.js';
import {
  isTerminalClientEvent,
  turnEventBase,
  type MessageQueuedEvent,
  type StoredClientEvent,
} from '../../core/protocol/client-events.js';
import { followEvents, type EventNotifier } from '../../core/protocol/event-log.js';
import { startSse, writeSse } from '../../core/platform/sse.js';
import { streamObserver } from '../../core/platform/metrics/index.js';
import { HttpError } from '../errors.js';

/** The largest event id (seq is a 32-bit column). */
export const MAX_EVENT_ID = 2_147_483_647;

/**
 * The event id to resume after: the `Last-Event-ID` header, else `?last_event_id=`, else 0 (from the start). Anything
 * but a non-negative decimal integer up to MAX_EVENT_ID is 400 `invalid_param` naming where it came from (issue 28: `abc`,
 * `-1`, `1e5` or 23 digits used to replay the whole stream or empty it silently). An empty header counts as absent
 * (an EventSource whose last event had no id).
 */
export function lastEventId(req: Request): number {
  const header = req.header('last-event-id');
  const query = req.query.last_event_id;
  if (header !== undefined && header.trim() !== '') return parseEventId(header.trim(), 'Last-Event-ID');
  if (query === undefined) return 0;
  if (typeof query !== 'string') throw badEventId('last_event_id');
  return query === '' ? 0 : parseEventId(query, 'last_event_id');
}

const badEventId = (field: string) =>
  new HttpError(400, 'invalid_param', `${field}: must be a non-negative decimal integer of at most ${MAX_EVENT_ID} (an event id).`);

function parseEventId(raw: string, field: string): number {
  if (!/^\d{1,10}$/.test(raw)) throw badEventId(field);
  const n = Number(raw);
  if (n > MAX_EVENT_ID) throw badEventId(field);
  return n;
}

/** What a queued message's `message_queued` frame needs of its row. */
type QueuedRow = {
  id: string;
  conversation_id: string;
  created_at: Date;
  status: string;
  queue_position: bigint | null;
  metadata: unknown;
};
const QUEUED_ROW = { id: true, conversation_id: true, created_at: true, status: true, queue_position: true, metadata: true } as const;

/**
 * The `message_queued` frame of a message waiting in its conversation's line (docs/PROTOCOL.md §1), its place counted
 * now: 1 + the messages queued before it. `always`: the chat request that queued it says so even if its turn was
 * claimed meanwhile (its place is then 1); a re-attach says so only while it still waits (null otherwise).
 */
export async function queuedFrame(db: Db, messageId: string, opts: { always?: boolean } = {}): Promise<MessageQueuedEvent | null> {
  const m: QueuedRow | null = await db.message.findUnique({ where: { id: messageId }, select: QUEUED_ROW });
  if (!m || m.queue_position === null || (m.status !== 'queued' && !opts.always)) return null;
  const ahead =
    m.status === 'queued'
      ? await db.message.count({
          where: { conversation_id: m.conversation_id, status: 'queued', queue_position: { lt: m.queue_position } },
        })
      : 0;
  const strategy = (m.metadata as { multitask?: { strategy?: MessageQueuedEvent['strategy'] } } | null)?.multitask?.strategy ?? 'enqueue';
  return { event: 'message_queued', ...turnEventBase(m), position: ahead + 1, strategy };
}

export async function streamTurn(
  /** `startedAtMs` (performance.now() when a chat request arrived): its first token and end are timed (metrics). */
  deps: { db: Db; notifier: EventNotifier; pingMs: number; startedAtMs?: number },
  req: Request,
  res: Response,
  messageId: string,
  afterSeq: number,
  /** A queued message's `message_queued` (queuedFrame): written first, without an `id:` (it is not in the event log). */
  queued: MessageQueuedEvent | null = null,
): Promise<void> {
  startSse(res);
  if (queued) writeSse(res, { event: queued.event, data: queued });
  const observed = streamObserver(deps.startedAtMs ?? null);
  const abort = new AbortController();
  const onClose = () => abort.abort();
  res.on('close', onClose);
  const ping = setInterval(() => writeSse(res, { event: 'ping', data: { event: 'ping' } }), deps.pingMs);
  try {
    for await (const e of followEvents(deps.db, deps.notifier, messageId, afterSeq, abort.signal)) {
      writeSse(res, { id: e.seq, event: e.event, data: e.data });
      observed.onEvent(e.event);
    }
  } finally {
    observed.close();
    clearInterval(ping);
    res.off('close', onClose);
    res.end();
  }
}

/** Blocking mode: waits for the terminal event and folds the stream into one answer. */
export async function collectTurn(
  deps: { db: Db; notifier: EventNotifier },
  messageId: string,
  signal: AbortSignal,
): Promise<StoredClientEvent[]> {
  const out: StoredClientEvent[] = [];
  for await (const e of followEvents(deps.db, deps.notifier, messageId, 0, signal)) {
    out.push(e);
    if (isTerminalClientEvent(e.event)) break;
  }
  return out;
}
