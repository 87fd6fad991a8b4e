/**
 * A scripted stand-in for the api's inner endpoints (docs/PROTOCOL.md §3): the only fake in these tests.
 * LLM invoke:
 * Each invoke consumes the next scripted response: text tokens, thinking, tool calls, usage, an error
 * chunk, an HTTP error, or a stream that never finishes. It records every request and whether the
 * client closed the connection before the response finished. Agent config: an in-memory prompt per
 * agent, recording the headers the agent stub forwarded.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { InvokeRequestParsed } from '../../core/protocol/inner-llm.js';
import type { Usage } from '../../core/protocol/run.js';

export interface ScriptedResponse {
  reasoning?: string[];
  text?: string[];
  toolCalls?: Array<{ id: string; name: string; args: unknown }>;
  usage?: Partial<Usage>;
  /** Delay before each chunk, ms. */
  delayMs?: number;
  /** After the tokens: a chunk with a negative code. */
  errorChunk?: { error_type: string; message: string };
  /** Instead of a stream: an HTTP error. */
  httpError?: { status: number; body: unknown };
  /** Keep the stream open after the tokens (until the client goes away). */
  hang?: boolean;
}

export interface RecordedCall {
  body: InvokeRequestParsed;
  headers: Record<string, string | string[] | undefined>;
  /** Resolves when the request ends: `aborted` = the client closed before the response finished. */
  ended: Promise<{ aborted: boolean }>;
}

export class FakeInnerLlm {
  readonly calls: RecordedCall[] = [];
  private queue: ScriptedResponse[] = [];
  private server: Server | null = null;
  url = '';
  readonly prompts = new Map<string, string>();
  readonly configRequests: Array<{
    method: string;
    agentId: string;
    headers: Record<string, string | string[] | undefined>;
    body: unknown;
  }> = [];
  /** Used when the script is empty. */
  fallback: ScriptedResponse = { text: ['ok'] };
  /** Workspace authorizations the backend asked for (issue 27), and how to answer the next ones (default: ok). */
  readonly workspaceChecks: Array<{ headers: Record<string, string | string[] | undefined>; body: Record<string, unknown> }> = [];
  workspaceVerdict: { status: number; body: unknown } = { status: 200, body: { ok: true } };

  script(...responses: ScriptedResponse[]): void {
    this.queue.push(...responses);
  }

  reset(): void {
    this.queue = [];
    this.calls.length = 0;
    this.configRequests.length = 0;
    this.prompts.clear();
    this.workspaceChecks.length = 0;
    this.workspaceVerdict = { status: 200, body: { ok: true } };
  }

  async start(): Promise<void> {
    const app = express();
    app.use(express.json({ limit: '25mb' }));
    app.post('/inner/api/agent/llm/invoke', async (req, res) => {
      const step = this.queue.shift() ?? this.fallback;
      let finished = false;
      let resolveEnded!: (v: { aborted: boolean }) => void;
      const ended = new Promise<{ aborted: boolean }>((r) => (resolveEnded = r));
      res.on('close', () => resolveEnded({ aborted: !finished }));
      this.calls.push({ body: req.body, headers: req.headers, ended });
      if (step.httpError) {
        finished = true;
        res.status(step.httpError.status).json(step.httpError.body);
        return;
      }
      res.status(200).setHeader('content-type', 'text/event-stream');
      res.flushHeaders();
      const send = async (payload: unknown) => {
        if (step.delayMs) await sleep(step.delayMs);
        if (res.destroyed) throw new Error('client gone');
        res.write(`data: ${JSON.stringify(payload)}\n\n`);
      };
      const chunk = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
        code: 0,
        message: '',
        data: { model: req.body?.target?.model ?? 'fake', delta: { index: 0, message: { content: '', ...message }, ...extra } },
      });
      try {
        for (const r of step.reasoning ?? []) await send(chunk({ reasoning_content: r }));
        for (const t of step.text ?? []) await send(chunk({ content: t }));
        if (step.toolCalls?.length) {
          await send(
            chunk({
              tool_calls: step.toolCalls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args) },
              })),
            }),
          );
        }
        if (step.errorChunk) {
          await send({ code: -1, message: step.errorChunk.message, data: step.errorChunk });
        } else if (step.hang) {
          await new Promise<void>((r) => res.on('close', () => r()));
          return;
        } else {
          const usage = {
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
            prompt_price: '0.00001',
            completion_price: '0.00002',
            total_price: '0.00003',
            currency: 'USD',
            ...step.usage,
          };
          await send(chunk({}, { usage, finish_reason: step.toolCalls?.length ? 'tool_calls' : 'stop' }));
        }
        finished = true;
        res.end();
      } catch {
        /* client went away */
      }
    });
    app.post('/inner/api/agent/execution-context/verify', (req, res) => {
      this.workspaceChecks.push({ headers: req.headers, body: req.body as Record<string, unknown> });
      if (req.get('x-inner-api-key') !== 'test-inner-key')
        return void res.status(401).json({ code: 'unauthorized', message: 'bad key', status: 401 });
      res.status(this.workspaceVerdict.status).json(this.workspaceVerdict.body);
    });
    app.get('/inner/api/agent-config/:agentId/prompt', (req, res) => {
      this.configRequests.push({ method: 'GET', agentId: req.params.agentId, headers: req.headers, body: undefined });
      if (req.get('x-inner-api-key') !== 'test-inner-key')
        return void res.status(401).json({ code: 'unauthorized', message: 'bad key', status: 401 });
      res.json({ prompt: this.prompts.get(req.params.agentId) ?? '' });
    });
    app.put('/inner/api/agent-config/:agentId/prompt', (req, res) => {
      this.configRequests.push({ method: 'PUT', agentId: req.params.agentId, headers: req.headers, body: req.body });
      this.prompts.set(req.params.agentId, req.body.prompt);
      res.json({ prompt: req.body.prompt });
    });
    await new Promise<void>((resolve) => {
      this.server = app.listen(0, '127.0.0.1', () => resolve());
    });
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
