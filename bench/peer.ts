/**
 * The peer path (issue 33): bench/peer-server.ts — LangGraph.js with its PostgreSQL checkpointer behind Express SSE —
 * started as a child process of the bench on the stack's embedded PostgreSQL, and one turn of it as the client sees it:
 * `POST /runs/stream` on a new thread, first token = the first `token` frame, end = the `end` frame.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseSse } from '../core/platform/sse.js';
import { nowMs, type TurnSample } from './client.js';

const SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'peer-server.ts');

export interface PeerHarness {
  pid: number;
  url: string;
  turn: (query: string) => Promise<TurnSample>;
  stop: () => Promise<void>;
}

export async function startPeer(opts: { databaseUrl: string; tokenDelayMs: number }): Promise<PeerHarness> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', SERVER], {
    env: { ...process.env, PEER_DATABASE_URL: opts.databaseUrl, PEER_TOKEN_DELAY_MS: String(opts.tokenDelayMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('the peer did not start within 60 s')), 60_000);
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /PEER_READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the peer exited with ${code} before it listened`));
    });
  });
  child.stdout!.resume();
  const url = `http://127.0.0.1:${port}`;
  return {
    pid: child.pid!,
    url,
    turn: (query) => peerTurn(url, query),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function peerTurn(url: string, query: string): Promise<TurnSample> {
  const s: TurnSample = {
    path: 'peer',
    ok: false,
    startAt: nowMs(),
    headersMs: null,
    ttftMs: null,
    endMs: null,
    frames: 0,
    id: null,
    frameTimes: [],
  };
  const thread = crypto.randomUUID();
  s.id = thread;
  try {
    const res = await fetch(`${url}/runs/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ thread_id: thread, query }),
      signal: AbortSignal.timeout(120_000),
    });
    s.headersMs = nowMs() - s.startAt;
    if (res.status !== 200 || !res.body) return { ...s, error: `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}` };
    for await (const f of parseSse(res.body)) {
      const at = nowMs();
      s.frames += 1;
      if (f.event === 'token' && s.ttftMs === null) s.ttftMs = at - s.startAt;
      if (f.event === 'error') return { ...s, error: `error event: ${f.data}` };
      if (f.event === 'end') {
        s.endMs = at - s.startAt;
        s.ok = s.ttftMs !== null;
        if (!s.ok) s.error = 'no token before end';
        return s;
      }
    }
    return { ...s, error: 'stream closed before end' };
  } catch (err) {
    return { ...s, error: (err as Error).message };
  }
}
