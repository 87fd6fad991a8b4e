/** Serves a turn's events from the event log as text/event-stream (any replica, resumable). */
import type { Request, Response } from 'express';
import type { Db } from '../core/db.js';
import { isTerminalClientEvent, type StoredClientEvent } from '../core/client-events.js';
import { followEvents, type EventNotifier } from '../core/event-log.js';
import { startSse, writeSse } from '../core/sse.js';
import { streamObserver } from '../core/metrics/index.js';

export function lastEventId(req: Request): number {
  const raw = req.header('last-event-id') ?? (typeof req.query.last_event_id === 'string' ? req.query.last_event_id : undefined);
  const n = raw === undefined ? 0 : Number(raw);
  // seq is a 32-bit column: anything past it simply means "after everything".
  return Number.isInteger(n) && n >= 0 ? Math.min(n, 2_147_483_647) : 0;
}

export async function streamTurn(
  /** `startedAtMs` (performance.now() when a chat request arrived): its first token and end are timed (metrics). */
  deps: { db: Db; notifier: EventNotifier; pingMs: number; startedAtMs?: number },
  req: Request,
  res: Response,
  messageId: string,
  afterSeq: number,
): Promise<void> {
  startSse(res);
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
