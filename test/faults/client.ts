/**
 * A client of the service API as a careful browser would be: it streams a turn over HTTP + SSE and, when
 * the connection drops (the api was killed, the database went away), re-attaches with `Last-Event-ID`
 * until the turn's terminal event arrives. What it received is kept for the audit (stream == stored log).
 */
import { parseSse, type SseFrame } from '../../core/platform/sse.js';
import { isTerminalClientEvent } from '../../core/protocol/client-events.js';
import { sleep } from './harness.js';

export interface ClientFrame {
  id: string | undefined;
  event: string | undefined;
  data: Record<string, unknown>;
}

export interface ApiTarget {
  apiUrl: string;
  key: string;
}

const headers = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

export async function postChat(api: ApiTarget, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${api.apiUrl}/v1/chat-messages`, {
    method: 'POST',
    headers: headers(api.key),
    body: JSON.stringify({ inputs: {}, response_mode: 'streaming', ...body }),
  });
}

/** One turn's stream, read in steps (before and after a fault), re-attaching when the connection breaks. */
export class TurnStream {
  readonly frames: ClientFrame[] = [];
  /** When each frame arrived (ms since the epoch), for the longest silence a user saw. */
  readonly receivedAt: number[] = [];
  /** How many times the client had to re-attach (the api or its database went away). */
  reattaches = 0;
  private it: AsyncIterator<SseFrame> | null;
  /**
   * The response being read. Held on purpose: undici cancels the body of a Response that is garbage
   * collected, and a stream not read for a while (a second turn in flight) would be cut by the client.
   */
  private res: Response | null;

  private constructor(
    private readonly api: ApiTarget,
    private readonly user: string,
    res: Response | null,
    private readonly knownTaskId?: string,
  ) {
    this.res = res;
    this.it = res?.body ? parseSse(res.body)[Symbol.asyncIterator]() : null;
  }

  /** POSTs a message; the response must be an SSE stream (200). */
  static async start(api: ApiTarget, body: { query: string; user: string; conversation_id?: string }): Promise<TurnStream> {
    const res = await postChat(api, body);
    if (res.status !== 200) throw new Error(`POST /v1/chat-messages answered ${res.status}: ${await res.text()}`);
    return new TurnStream(api, body.user, res);
  }

  /** Attaches to an existing turn (e.g. the continuation a form submission started). */
  static async attach(api: ApiTarget, taskId: string, user: string, timeoutMs = 60_000): Promise<TurnStream> {
    const s = new TurnStream(api, user, null, taskId);
    await s.reattach(timeoutMs);
    s.reattaches = 0;
    return s;
  }

  get taskId(): string | undefined {
    return this.knownTaskId ?? (this.frames[0]?.data.task_id as string | undefined);
  }
  get messageId(): string {
    return this.frames.find((f) => typeof f.data.message_id === 'string')?.data.message_id as string;
  }
  get conversationId(): string {
    return this.frames.find((f) => typeof f.data.conversation_id === 'string')?.data.conversation_id as string;
  }
  get terminal(): ClientFrame | undefined {
    return this.frames.find((f) => isTerminalClientEvent(f.event ?? ''));
  }
  get answer(): string | undefined {
    return this.frames.find((f) => f.event === 'message')?.data.answer as string | undefined;
  }
  get deltas(): string {
    return this.frames
      .filter((f) => f.event === 'agent_message')
      .map((f) => f.data.answer as string)
      .join('');
  }
  count(event: string): number {
    return this.frames.filter((f) => f.event === event).length;
  }

  /**
   * Reads frames until `until` holds for one (or the terminal event), within `timeoutMs`; a broken
   * connection is re-attached from the last received id.
   */
  async read(opts: { until?: (f: ClientFrame) => boolean; timeoutMs: number; what?: string }): Promise<ClientFrame[]> {
    const deadline = Date.now() + opts.timeoutMs;
    const got: ClientFrame[] = [];
    for (;;) {
      if (this.terminal && !opts.until) return got;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(this.timeoutMessage(opts.what ?? 'terminal event', opts.timeoutMs));
      let r: IteratorResult<SseFrame> | 'timeout' | 'broken';
      try {
        r = this.it ? await Promise.race([this.it.next(), sleep(remaining).then(() => 'timeout' as const)]) : 'broken';
      } catch {
        r = 'broken';
      }
      if (r === 'timeout') throw new Error(this.timeoutMessage(opts.what ?? 'terminal event', opts.timeoutMs));
      if (r === 'broken' || r.done) {
        if (this.terminal) return got;
        await this.reattach(deadline - Date.now());
        continue;
      }
      if (r.value.event === 'ping') continue;
      const frame: ClientFrame = { id: r.value.id, event: r.value.event, data: JSON.parse(r.value.data) as Record<string, unknown> };
      this.frames.push(frame);
      this.receivedAt.push(Date.now());
      got.push(frame);
      if (opts.until?.(frame)) return got;
      if (isTerminalClientEvent(frame.event ?? '')) {
        if (opts.until)
          throw new Error(
            `the turn ended (${frame.event} ${JSON.stringify(frame.data).slice(0, 300)}) before ${opts.what ?? 'the awaited frame'}`,
          );
        return got;
      }
    }
  }

  /** The longest interval between two frames the client received (the stream's longest silence). */
  longestSilenceMs(): number {
    let max = 0;
    for (let i = 1; i < this.receivedAt.length; i++) max = Math.max(max, this.receivedAt[i]! - this.receivedAt[i - 1]!);
    return max;
  }

  /** Reads to the terminal event. */
  async finish(timeoutMs: number): Promise<ClientFrame> {
    await this.read({ timeoutMs });
    return this.terminal!;
  }

  /** Drops the connection without waiting (the client went away). */
  close(): void {
    void this.it?.return?.(undefined);
    this.it = null;
    this.res = null;
  }

  private async reattach(budgetMs: number): Promise<void> {
    const taskId = this.taskId;
    if (!taskId) throw new Error('the stream broke before its first frame: no task id to re-attach to');
    this.close();
    const deadline = Date.now() + Math.max(budgetMs, 0);
    let last = '';
    while (Date.now() < deadline) {
      try {
        const lastId = this.frames.at(-1)?.id;
        const res = await fetch(`${this.api.apiUrl}/v1/chat-messages/${taskId}/events?user=${encodeURIComponent(this.user)}`, {
          headers: { ...headers(this.api.key), ...(lastId ? { 'last-event-id': lastId } : {}) },
        });
        if (res.status === 200 && res.body) {
          this.res = res;
          this.it = parseSse(res.body)[Symbol.asyncIterator]();
          this.reattaches++;
          return;
        }
        last = `${res.status} ${await res.text()}`;
      } catch (err) {
        last = (err as Error).message;
      }
      await sleep(300);
    }
    throw new Error(`could not re-attach to turn ${taskId} (last: ${last}); ${this.summary()}`);
  }

  private timeoutMessage(what: string, ms: number): string {
    return `no ${what} within ${ms} ms; ${this.summary()}`;
  }

  summary(): string {
    const last = this.frames.at(-1);
    return `received ${this.frames.length} frames (${this.count('agent_message')} deltas, ${this.deltas.length} chars), last: ${last ? `${last.id} ${last.event}` : 'none'}, re-attaches: ${this.reattaches}`;
  }
}

/** GET /v1/messages of a conversation (history). */
export async function history(api: ApiTarget, conversationId: string, user: string): Promise<Response> {
  return fetch(`${api.apiUrl}/v1/messages?conversation_id=${conversationId}&user=${encodeURIComponent(user)}`, {
    headers: headers(api.key),
  });
}

/** POST /v1/form/human_input/{token}. */
export async function submitForm(api: ApiTarget, token: string, user: string, answer: string): Promise<Response> {
  return fetch(`${api.apiUrl}/v1/form/human_input/${token}`, {
    method: 'POST',
    headers: headers(api.key),
    body: JSON.stringify({ inputs: { answer }, action: 'submit', user }),
  });
}

/** A streamed turn from POST to its terminal event. */
export async function runTurn(
  api: ApiTarget,
  body: { query: string; user: string; conversation_id?: string },
  timeoutMs: number,
): Promise<TurnStream> {
  const s = await TurnStream.start(api, body);
  await s.finish(timeoutMs);
  return s;
}
