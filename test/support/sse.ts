/** A client for the api's SSE streams, as a browser or the Dify SDK would read them. */
import { parseSse } from '../../core/platform/sse.js';

export interface ClientFrame {
  id: string | undefined;
  event: string | undefined;
  data: Record<string, unknown>;
}

export async function postChat(
  apiUrl: string,
  key: string,
  body: Record<string, unknown>,
  init: { signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(`${apiUrl}/v1/chat-messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: {}, response_mode: 'streaming', ...body }),
    signal: init.signal,
  });
}

/** Reads frames until the stream closes (pings dropped). */
export async function readFrames(res: Response, opts: { until?: (f: ClientFrame) => boolean } = {}): Promise<ClientFrame[]> {
  if (!res.body) throw new Error('no body');
  const out: ClientFrame[] = [];
  for await (const f of parseSse(res.body)) {
    if (f.event === 'ping') continue;
    const frame = { id: f.id, event: f.event, data: JSON.parse(f.data) as Record<string, unknown> };
    out.push(frame);
    if (opts.until?.(frame)) break;
  }
  return out;
}

export async function chat(apiUrl: string, key: string, body: Record<string, unknown>): Promise<{ status: number; frames: ClientFrame[] }> {
  const res = await postChat(apiUrl, key, body);
  if (res.status !== 200)
    return { status: res.status, frames: [{ id: undefined, event: 'http_error', data: (await res.json()) as Record<string, unknown> }] };
  return { status: res.status, frames: await readFrames(res) };
}

/** Reads one response in several steps (e.g. before and after killing a worker) without cancelling it. */
export class FrameReader {
  private readonly it: AsyncIterator<{ id?: string; event?: string; data: string }>;
  /** Held so undici does not garbage-collect the Response and cut its body while no read is pending. */
  private readonly res: Response;
  constructor(res: Response) {
    this.res = res;
    if (!res.body) throw new Error('no body');
    this.it = parseSse(res.body)[Symbol.asyncIterator]();
  }

  async read(until?: (f: ClientFrame) => boolean): Promise<ClientFrame[]> {
    const out: ClientFrame[] = [];
    for (;;) {
      const r = await this.it.next();
      if (r.done) return out;
      if (r.value.event === 'ping') continue;
      const frame = { id: r.value.id, event: r.value.event, data: JSON.parse(r.value.data) as Record<string, unknown> };
      out.push(frame);
      if (until?.(frame)) return out;
    }
  }
}
