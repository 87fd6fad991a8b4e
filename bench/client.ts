/**
 * One turn through each path, timed at the client the way a browser would see it.
 *
 * - durable: `POST /v1/chat-messages` (streaming) on the api; first answer token = first `agent_message`
 *   frame, end = `message_end`.
 * - direct: `POST /runs` + `GET /runs/{id}/events/sse` on the agent backend; first answer token = first
 *   `agent_message_delta`, end = the terminal event.
 *
 * Times are milliseconds from just before the first request; `at` values are epoch ms (sub-ms precision)
 * so they can be lined up with database and Temporal timestamps of the same machine.
 */
import crypto from 'node:crypto';
import { parseSse } from '../core/platform/sse.js';

/** floor: the bare Temporal workflow of a turn's shape (bench/floor.ts), no api, no backend; peer: LangGraph.js (bench/peer.ts). */
export type PathName = 'durable' | 'direct' | 'floor' | 'peer';

export interface TurnSample {
  path: PathName;
  ok: boolean;
  error?: string;
  /** Refused by admission control (api 503 `server_busy`, backend 503 `backend_busy`): load shed, not an error. */
  shed?: { retryAfterS: number };
  /** Epoch ms just before the first request. */
  startAt: number;
  /** Time to the response headers of the streaming request, ms. */
  headersMs: number | null;
  /** Time to the first answer token, ms (null when none arrived). */
  ttftMs: number | null;
  /** Time to `message_end` (durable) / the terminal event (direct), ms. */
  endMs: number | null;
  /** SSE frames received (pings and keep-alive comments excluded). */
  frames: number;
  /** durable: message id; direct: backend run id. */
  id: string | null;
  /** Epoch ms of each frame's arrival by its SSE id (for fan-out lag). */
  frameTimes: { id: string; event: string; at: number }[];
}

/** Epoch milliseconds with sub-millisecond precision. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

const TURN_TIMEOUT_MS = 120_000;

export interface DurableTarget {
  apiUrl: string;
  apiKey: string;
  user: string;
}

export async function durableTurn(target: DurableTarget, query: string): Promise<TurnSample> {
  const s = emptySample('durable');
  const signal = AbortSignal.timeout(TURN_TIMEOUT_MS);
  try {
    const res = await fetch(`${target.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${target.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: {}, query, user: target.user, response_mode: 'streaming' }),
      signal,
    });
    s.headersMs = nowMs() - s.startAt;
    if (res.status !== 200 || !res.body) return failOrShed(s, res, 'server_busy', `HTTP ${res.status}`);
    for await (const f of parseSse(res.body)) {
      if (f.event === 'ping') continue;
      const at = nowMs();
      s.frames += 1;
      s.frameTimes.push({ id: f.id ?? '', event: f.event ?? '', at });
      const data = JSON.parse(f.data) as { message_id?: string; code?: string; message?: string };
      s.id ??= data.message_id ?? null;
      if (f.event === 'agent_message' && s.ttftMs === null) s.ttftMs = at - s.startAt;
      if (f.event === 'error') return fail(s, `error event: ${data.code}: ${data.message}`);
      if (f.event === 'message_end') {
        s.endMs = at - s.startAt;
        s.ok = s.ttftMs !== null;
        if (!s.ok) s.error = 'no agent_message before message_end';
        return s;
      }
    }
    return fail(s, 'stream closed before message_end');
  } catch (err) {
    return fail(s, (err as Error).message);
  }
}

export interface DirectTarget {
  backendUrl: string;
  token: string;
  /** A CreateRunRequest captured from a durable turn, without session_snapshot / idempotency_key. */
  request: Record<string, unknown>;
}

export async function directTurn(target: DirectTarget): Promise<TurnSample> {
  const s = emptySample('direct');
  const signal = AbortSignal.timeout(TURN_TIMEOUT_MS);
  const auth = { authorization: `Bearer ${target.token}` };
  try {
    const created = await fetch(`${target.backendUrl}/runs`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ ...target.request, idempotency_key: `bench-direct-${crypto.randomUUID()}` }),
      signal,
    });
    if (created.status !== 202) return failOrShed(s, created, 'backend_busy', `create run HTTP ${created.status}`);
    const text = await created.text();
    const runId = (JSON.parse(text) as { run_id: string }).run_id;
    s.id = runId;
    const res = await fetch(`${target.backendUrl}/runs/${encodeURIComponent(runId)}/events/sse`, {
      headers: { ...auth, accept: 'text/event-stream' },
      signal,
    });
    s.headersMs = nowMs() - s.startAt;
    if (res.status !== 200 || !res.body) return fail(s, `events HTTP ${res.status}`);
    for await (const f of parseSse(res.body)) {
      const at = nowMs();
      s.frames += 1;
      s.frameTimes.push({ id: f.id ?? '', event: f.event ?? '', at });
      const ev = JSON.parse(f.data) as { type: string; data?: { error?: string } };
      if (ev.type === 'agent_message_delta' && s.ttftMs === null) s.ttftMs = at - s.startAt;
      if (ev.type === 'run_succeeded') {
        s.endMs = at - s.startAt;
        s.ok = s.ttftMs !== null;
        if (!s.ok) s.error = 'no agent_message_delta before run_succeeded';
        return s;
      }
      if (ev.type === 'run_failed' || ev.type === 'run_cancelled') return fail(s, `${ev.type}: ${ev.data?.error ?? ''}`);
    }
    return fail(s, 'stream closed before the terminal event');
  } catch (err) {
    return fail(s, (err as Error).message);
  }
}

function emptySample(path: PathName): TurnSample {
  return { path, ok: false, startAt: nowMs(), headersMs: null, ttftMs: null, endMs: null, frames: 0, id: null, frameTimes: [] };
}

/** A refused request: shed when it is the 503 of admission control (`code`), else a failure. */
async function failOrShed(s: TurnSample, res: Response, code: string, what: string): Promise<TurnSample> {
  const text = await res.text();
  let bodyCode: unknown;
  try {
    bodyCode = (JSON.parse(text) as { code?: unknown }).code;
  } catch {
    bodyCode = undefined;
  }
  if (res.status === 503 && bodyCode === code) s.shed = { retryAfterS: Number(res.headers.get('retry-after')) || 1 };
  return fail(s, `${what}: ${text.slice(0, 200)}`);
}

function fail(s: TurnSample, error: string): TurnSample {
  s.ok = false;
  s.error = error;
  return s;
}
