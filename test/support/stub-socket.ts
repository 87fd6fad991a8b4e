/** Requests to the agent stub over its unix socket (the stub has no TCP listener; agent-backend/stub-server.ts). */
import http from 'node:http';

export interface SocketResponse {
  status: number;
  text: string;
  json(): unknown;
}

export function socketRequest(
  socketPath: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<SocketResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, path, method: opts.method ?? 'GET', headers: { host: 'agent-stub', ...opts.headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** GET/PUT /agent-stub/config/prompt with a stub token. */
export function stubCall(socketPath: string, token: string | null, method: 'GET' | 'PUT' = 'GET', body?: unknown): Promise<SocketResponse> {
  return socketRequest(socketPath, '/agent-stub/config/prompt', {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}
