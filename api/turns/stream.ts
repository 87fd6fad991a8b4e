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
import type { AppContext } from '../auth.js';
import type { CredentialWatch } from '../credential-watch.js';
import type { ErrorCode } from '../../core/protocol/error-codes.js';

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

/** The app API key a service-API stream was opened with, and the watch that ends it when the key is revoked. */
export interface StreamCredential {
  watch: CredentialWatch;
  tokenId: string;
}

export function streamCredential(watch: CredentialWatch | undefined, app: AppContext): StreamCredential | undefined {
  return watch && app.apiTokenId ? { watch, tokenId: app.apiTokenId } : undefined;
}

/** The stream's end when its key is revoked: the turn itself goes on unless the revoke stopped it (docs/security.md). */
export const KEY_REVOKED = {
  code: 'api_key_revoked',
  status: 401,
  message: 'The API key of this stream was revoked. The turn is not stopped by this; read its outcome with a valid key.',
} as const satisfies { code: ErrorCode; status: number; message: string };

/**
 * Runs `follow` with an abort signal that fires when the client goes away or, with a credential, when its key is
 * revoked (checked once now too); resolves whether the key was revoked.
 */
async function whileCredentialValid(
  credential: StreamCredential | undefined,
  abort: AbortController,
  follow: (isRevoked: () => boolean) => Promise<void>,
): Promise<boolean> {
  let revoked = false;
  const release = credential?.watch.hold(credential.tokenId, () => {
    revoked = true;
    abort.abort();
  });
  try {
    await follow(() => revoked);
  } finally {
    release?.();
  }
  return revoked;
}

export async function streamTurn(
  /**
   * `startedAtMs` (performance.now() when a chat request arrived): its first token and end are timed (metrics).
   * `credential`: the app key the stream was opened with; its revoke ends the stream with KEY_REVOKED.
   */
  deps: { db: Db; notifier: EventNotifier; pingMs: number; startedAtMs?: number; credential?: StreamCredential },
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
  let ended = false;
  try {
    const revoked = await whileCredentialValid(deps.credential, abort, async (isRevoked) => {
      for await (const e of followEvents(deps.db, deps.notifier, messageId, afterSeq, abort.signal)) {
        if (isRevoked()) break;
        writeSse(res, { id: e.seq, event: e.event, data: e.data });
        observed.onEvent(e.event);
        if (isTerminalClientEvent(e.event)) ended = true;
      }
    });
    // Not an event of the log (no `id:`): a client re-attaching with a valid key resumes where it was.
    if (revoked && !ended && !res.writableEnded) {
      const m = await deps.db.message.findUnique({
        where: { id: messageId },
        select: { id: true, conversation_id: true, created_at: true },
      });
      if (m) writeSse(res, { event: 'error', data: { event: 'error', ...turnEventBase(m), ...KEY_REVOKED } });
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
  deps: { db: Db; notifier: EventNotifier; credential?: StreamCredential },
  messageId: string,
  signal: AbortSignal,
): Promise<StoredClientEvent[]> {
  const out: StoredClientEvent[] = [];
  const abort = new AbortController();
  const onAbort = () => abort.abort();
  signal.addEventListener('abort', onAbort);
  let ended = false;
  try {
    const revoked = await whileCredentialValid(deps.credential, abort, async () => {
      for await (const e of followEvents(deps.db, deps.notifier, messageId, 0, abort.signal)) {
        out.push(e);
        if (isTerminalClientEvent(e.event)) {
          ended = true;
          break;
        }
      }
    });
    // The request waiting for the answer ends like a stream: 401 api_key_revoked (the turn goes on).
    if (revoked && !ended) throw new HttpError(KEY_REVOKED.status, KEY_REVOKED.code, KEY_REVOKED.message);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  return out;
}
