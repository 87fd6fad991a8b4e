/** Server-sent events: one writer for express responses and one parser for fetch bodies. */
import type { Response } from 'express';

export interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

/** Parse a text/event-stream body into frames (comments and retry lines are skipped). */
export async function* parseSse(body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  let buf = '';
  let frame: { id?: string; event?: string; data: string[] } = { data: [] };
  const iterable: AsyncIterable<Uint8Array> =
    Symbol.asyncIterator in (body as object) ? (body as AsyncIterable<Uint8Array>) : streamIterable(body as ReadableStream<Uint8Array>);
  for await (const chunk of iterable) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.search(/\r?\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === '\r' ? 2 : 1));
      if (line === '') {
        if (frame.data.length > 0 || frame.event) yield { id: frame.id, event: frame.event, data: frame.data.join('\n') };
        frame = { data: [] };
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') frame.data.push(value);
      else if (field === 'event') frame.event = value;
      else if (field === 'id') frame.id = value;
    }
  }
  if (frame.data.length > 0) yield { id: frame.id, event: frame.event, data: frame.data.join('\n') };
}

async function* streamIterable(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      if (value) yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** Start an SSE response: headers flushed, no buffering by proxies. */
export function startSse(res: Response): void {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
}

export function writeSse(res: Response, frame: { id?: string | number; event?: string; data: unknown }): boolean {
  let out = '';
  if (frame.id !== undefined) out += `id: ${frame.id}\n`;
  if (frame.event) out += `event: ${frame.event}\n`;
  const data = typeof frame.data === 'string' ? frame.data : JSON.stringify(frame.data);
  for (const line of data.split('\n')) out += `data: ${line}\n`;
  return res.write(out + '\n');
}

export function writeSseComment(res: Response, text: string): boolean {
  return res.write(`: ${text}\n\n`);
}
