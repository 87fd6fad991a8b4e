/** Small HTTP helpers for the service API tests: every request has a timeout, so a hang fails fast. */
import zlib from 'node:zlib';

export interface ApiResult {
  status: number;
  body: unknown;
  headers: Headers;
}

export async function api(
  baseUrl: string,
  key: string | null,
  method: string,
  path: string,
  init: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ApiResult> {
  const headers: Record<string, string> = { ...(key ? { authorization: `Bearer ${key}` } : {}), ...init.headers };
  let body: BodyInit | undefined;
  if (init.body instanceof FormData || typeof init.body === 'string' || init.body instanceof Uint8Array) body = init.body as BodyInit;
  else if (init.body !== undefined) {
    body = JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body, signal: AbortSignal.timeout(init.timeoutMs ?? 10_000) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (SSE, files)
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** Opens a stream route and reports only its status (the body is cancelled). */
export async function statusOf(url: string, init: RequestInit & { timeoutMs?: number }): Promise<number> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(init.timeoutMs ?? 10_000) });
  await res.body?.cancel().catch(() => undefined);
  return res.status;
}

/** A valid 1×1 PNG. */
export function tinyPng(): Uint8Array {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf: Buffer) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(1, 0);
  ihdr.writeUInt32BE(1, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  const idat = zlib.deflateSync(Buffer.from([0, 255, 0, 0, 255]));
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk('IHDR', ihdr),
      chunk('IDAT', idat),
      chunk('IEND', Buffer.alloc(0)),
    ]),
  );
}

export function uploadForm(bytes: Uint8Array, filename: string, user: string | null, mime = 'application/octet-stream'): FormData {
  const form = new FormData();
  form.append('file', new Blob([bytes as Uint8Array<ArrayBuffer>], { type: mime }), filename);
  if (user !== null) form.append('user', user);
  return form;
}

export async function upload(
  baseUrl: string,
  key: string,
  bytes: Uint8Array,
  filename: string,
  user: string,
  mime?: string,
): Promise<ApiResult> {
  return api(baseUrl, key, 'POST', '/v1/files/upload', { body: uploadForm(bytes, filename, user, mime), timeoutMs: 30_000 });
}
