/** Client of the agent backend run protocol (PROTOCOL.md §2). */
import { parseSse } from './sse.js';
import {
  CreateRunResponse,
  EventsPage,
  RunEvent,
  RunStatusResponse,
  isTerminal,
  type CreateRunRequest,
} from './protocol/run.js';
import type { z } from 'zod';

export class BackendHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`agent backend ${what} answered ${status}: ${body.slice(0, 500)}`);
  }
}

export class AgentBackendClient {
  /** `baseUrl` may be a function when the backend's address is known only after start-up (dev stack). */
  constructor(
    private readonly base: string | (() => string),
    private readonly token: string,
  ) {}

  get baseUrl(): string {
    return typeof this.base === 'function' ? this.base() : this.base;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, ...extra };
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
    return EventsPage.parse(JSON.parse(text));
  }

  /** Live events after the cursor (exclusive) until the terminal event or the connection ends. */
  async *streamEvents(runId: string, after: string | null, signal?: AbortSignal): AsyncGenerator<RunEvent> {
    const qs = after ? `?after=${encodeURIComponent(after)}` : '';
    const res = await fetch(`${this.baseUrl}/runs/${encodeURIComponent(runId)}/events/sse${qs}`, {
      headers: this.headers({ accept: 'text/event-stream' }),
      signal,
    });
    if (!res.ok || !res.body) throw new BackendHttpError(res.status, await res.text(), 'stream events');
    for await (const frame of parseSse(res.body)) {
      if (!frame.data) continue;
      const event = RunEvent.parse(JSON.parse(frame.data));
      yield event;
      if (isTerminal(event)) return;
    }
  }
}
