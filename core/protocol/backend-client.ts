/** Client of the agent backend run protocol (docs/PROTOCOL.md §2). */
import http from 'node:http';
import https from 'node:https';
import { text as readText } from 'node:stream/consumers';
import { parseSse } from '../platform/sse.js';
import { storableJsonText } from '../platform/storable-text.js';
import { CreateRunResponse, EventsPage, RunEvent, RunStatusResponse, isTerminal, type CreateRunRequest } from './run.js';
import { BackendErrorBody, ModulesResponse, ValidateCompositionResponse } from './registry.js';
import type { z } from 'zod';
import { withTraceHeaders } from '../platform/tracing/index.js';

export class BackendHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`agent backend ${what} answered ${status}: ${body.slice(0, 500)}`);
  }

  /** The backend's `{code, message, status}`, or null when the body is something else (a proxy's page). */
  errorBody(): BackendErrorBody | null {
    try {
      const parsed = BackendErrorBody.safeParse(JSON.parse(this.body));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }
}

/** A composition the backend refused (400/422): its error body, as POST /runs would have answered. */
export type CompositionVerdict = { ok: true } | { ok: false; error: BackendErrorBody };

/**
 * The event stream went silent: no byte (not even the backend's keep-alive comment, sent every
 * SSE_PING_MS) for the idle limit. A half-open connection (the peer vanished without a FIN/RST) would
 * otherwise stall the turn until the activity's timeout; the caller reattaches from its cursor instead.
 */
export class StreamIdleError extends Error {
  constructor(readonly idleMs: number) {
    super(`agent backend event stream silent for ${idleMs} ms (half-open connection?)`);
    this.name = 'StreamIdleError';
  }
}

/** Three keep-alive intervals of the backend (SSE_PING_MS, 10 s by default). */
export const DEFAULT_STREAM_IDLE_MS = 30_000;

export class AgentBackendClient {
  /** `baseUrl` may be a function when the backend's address is known only after start-up (dev stack). */
  constructor(
    private readonly base: string | (() => string),
    private readonly token: string,
    private readonly opts: { streamIdleMs?: number } = {},
  ) {}

  get baseUrl(): string {
    return typeof this.base === 'function' ? this.base() : this.base;
  }

  /** With tracing on, `traceparent` of the active span too (the runAgent activity's): the backend run joins the turn's trace. */
  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return withTraceHeaders({ authorization: `Bearer ${this.token}`, ...extra });
  }

  async createRun(req: CreateRunRequest, signal?: AbortSignal): Promise<z.infer<typeof CreateRunResponse>> {
    const res = await fetch(`${this.baseUrl}/runs`, {
      method: 'POST',
      headers: this.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify(req),
      signal,
    });
    const text = await res.text();
    if (res.status !== 202 && res.status !== 200) throw new BackendHttpError(res.status, text, 'create run');
    return CreateRunResponse.parse(JSON.parse(text));
  }

  /** The backend's registry (docs/PROTOCOL.md §2 "Registry"): modules, their availability and config schemas. */
  async listModules(signal?: AbortSignal): Promise<ModulesResponse> {
    const res = await fetch(`${this.baseUrl}/modules`, { headers: this.headers(), signal });
    const text = await res.text();
    if (!res.ok) throw new BackendHttpError(res.status, text, 'list modules');
    return ModulesResponse.parse(JSON.parse(text));
  }

  /**
   * The planning of POST /runs without a run: `{ok: false, error}` for the 400/422 POST /runs would answer;
   * anything else (401, 404 of a backend without the route, 5xx) throws BackendHttpError.
   */
  async validateComposition(req: CreateRunRequest, signal?: AbortSignal): Promise<CompositionVerdict> {
    const res = await fetch(`${this.baseUrl}/compositions/validate`, {
      method: 'POST',
      headers: this.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify(req),
      signal,
    });
    const text = await res.text();
    if (res.ok) return ValidateCompositionResponse.parse(JSON.parse(text));
    const err = new BackendHttpError(res.status, text, 'validate composition');
    const body = res.status === 400 || res.status === 422 ? err.errorBody() : null;
    if (!body) throw err;
    return { ok: false, error: body };
  }

  async getRun(runId: string, signal?: AbortSignal): Promise<z.infer<typeof RunStatusResponse>> {
    const res = await fetch(`${this.baseUrl}/runs/${encodeURIComponent(runId)}`, { headers: this.headers(), signal });
    const text = await res.text();
    if (!res.ok) throw new BackendHttpError(res.status, text, 'get run');
    return RunStatusResponse.parse(JSON.parse(text));
  }

  /** Asks the backend to cancel; `ended` is true when the run had already ended otherwise (409). */
  async cancelRun(runId: string, body: { reason?: string; message?: string } = {}): Promise<{ ended: boolean; status?: string }> {
    const res = await fetch(`${this.baseUrl}/runs/${encodeURIComponent(runId)}/cancel`, {
      method: 'POST',
      headers: this.headers({ 'content-type': 'application/json' }),
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status === 409) return { ended: true };
    if (!res.ok) throw new BackendHttpError(res.status, text, 'cancel run');
    return { ended: false, status: (JSON.parse(text) as { status?: string }).status };
  }

  async listEvents(runId: string, after: string | null, limit = 500, signal?: AbortSignal): Promise<z.infer<typeof EventsPage>> {
    const qs = new URLSearchParams({ limit: String(limit) });
    if (after) qs.set('after', after);
    const res = await fetch(`${this.baseUrl}/runs/${encodeURIComponent(runId)}/events?${qs}`, { headers: this.headers(), signal });
    const text = await res.text();
    if (!res.ok) throw new BackendHttpError(res.status, text, 'list events');
    return EventsPage.parse(JSON.parse(storableJsonText(text)));
  }

  /**
   * Live events after the cursor (exclusive) until the terminal event or the connection ends. Throws
   * StreamIdleError when no byte arrives for `streamIdleMs` (connecting included).
   */
  async *streamEvents(runId: string, after: string | null, signal?: AbortSignal): AsyncGenerator<RunEvent> {
    const idleMs = this.opts.streamIdleMs ?? DEFAULT_STREAM_IDLE_MS;
    const idle = new AbortController();
    const timer = setTimeout(() => idle.abort(new StreamIdleError(idleMs)), idleMs);
    const both = signal ? AbortSignal.any([signal, idle.signal]) : idle.signal;
    try {
      const qs = after ? `?after=${encodeURIComponent(after)}` : '';
      // node:http rather than fetch: the body is read as Buffers, without the WHATWG stream layers fetch adds (a CPU
      // profile of a streamed turn had web streams at ~7 % of the process; this is the hop only durable turns have).
      const res = await httpGet(
        new URL(`${this.baseUrl}/runs/${encodeURIComponent(runId)}/events/sse${qs}`),
        this.headers({ accept: 'text/event-stream' }),
        both,
      );
      if (res.statusCode !== 200) throw new BackendHttpError(res.statusCode ?? 0, await readText(res), 'stream events');
      // Every chunk (events and keep-alive comments alike) proves the connection alive.
      async function* watched(): AsyncGenerator<Uint8Array> {
        for await (const chunk of res as AsyncIterable<Uint8Array>) {
          timer.refresh();
          yield chunk;
        }
      }
      for await (const frame of parseSse(watched())) {
        if (!frame.data) continue;
        // The api's one intake of a run's events: whatever it stores of them (the event log, thoughts, the answer, a
        // form, the session snapshot) derives from these, so NUL and lone surrogates are replaced here, whatever the
        // backend sent (core/platform/storable-text.ts; the reference backend already stores them replaced).
        const event = RunEvent.parse(JSON.parse(storableJsonText(frame.data)));
        yield event;
        if (isTerminal(event)) return;
      }
    } catch (err) {
      if (idle.signal.aborted && !signal?.aborted) throw idle.signal.reason as StreamIdleError;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A GET whose response is read as a Node stream; aborting `signal` destroys the request and its response. */
function httpGet(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? https : http).request(url, { method: 'GET', headers, signal });
    req.once('response', resolve);
    // `on`: the request can fail again after its response began (a reset mid-stream); an error event without a
    // listener would end the process (issue 28). The stream's own reader sees that failure as its error.
    req.on('error', reject);
    req.end();
  });
}
