/**
 * A fake OpenAI-compatible `/chat/completions` server over real HTTP with real SSE streaming.
 * Behaviour is chosen by the request's model name (`fake-ok`, `fake-tools`, `fake-429`, ...).
 */
import http from 'node:http';
import { listen, type Served } from './helpers.js';

export interface SeenRequest {
  authorization: string | undefined;
  body: Record<string, unknown>;
}

export interface FakeOpenAi extends Served {
  requests: SeenRequest[];
  /** Resolves when a streaming response of `fake-forever` was closed by the client. */
  foreverClosed: Promise<void>;
}

const sse = (res: http.ServerResponse, data: unknown) => res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
const delta = (d: Record<string, unknown>, finish: string | null = null) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta: d, finish_reason: finish }],
});

export async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const requests: SeenRequest[] = [];
  let onForeverClosed!: () => void;
  const foreverClosed = new Promise<void>((r) => (onForeverClosed = r));

  const handler: http.RequestListener = (req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      requests.push({ authorization: req.headers.authorization, body });
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const model = String(body.model);
      const json = (status: number, obj: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(obj));
      const stream = () => res.writeHead(200, { 'content-type': 'text/event-stream' });
      switch (model) {
        case 'fake-429':
          return json(429, { error: { message: 'Rate limit reached for requests', type: 'requests' } });
        case 'fake-401-echo':
          // Real providers echo (parts of) the key back; it must not reach chunks or logs.
          return json(401, { error: { message: `Incorrect API key provided: ${String(req.headers.authorization).slice(7)}` } });
        case 'fake-400':
          return json(400, { error: { message: 'max_tokens is too large' } });
        case 'fake-503':
          return json(503, { error: { message: 'overloaded' } });
        case 'fake-midstream':
          stream();
          sse(res, delta({ role: 'assistant', content: 'Partial ' }));
          sse(res, delta({ content: 'answer ' }));
          setTimeout(() => res.socket?.destroy(), 20);
          return;
        case 'fake-tools':
          stream();
          sse(
            res,
            delta({
              role: 'assistant',
              content: null,
              tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'calculator', arguments: '' } }],
            }),
          );
          sse(res, delta({ tool_calls: [{ index: 0, function: { arguments: '{"expre' } }] }));
          sse(res, delta({ tool_calls: [{ index: 0, function: { arguments: 'ssion":"6*7"}' } }] }));
          sse(res, delta({}, 'tool_calls'));
          sse(res, { id: 'chatcmpl-1', choices: [], usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 } });
          sse(res, '[DONE]');
          return res.end();
        case 'fake-nul':
          // Text PostgreSQL cannot store (issue 47): NUL and lone surrogates in the reasoning and in the answer.
          stream();
          sse(res, delta({ role: 'assistant', reasoning_content: 'Thinking\u0000 about \ud800 it. ' }));
          for (const piece of ['Null\u0000here ', 'and \udc00 a ', 'half pair, ', 'then \ud83d\ude00 a whole one.'])
            sse(res, delta({ content: piece }));
          sse(res, delta({}, 'stop'));
          sse(res, { id: 'chatcmpl-1', choices: [], usage: { prompt_tokens: 11, completion_tokens: 9, total_tokens: 20 } });
          sse(res, '[DONE]');
          return res.end();
        case 'fake-forever': {
          stream();
          let i = 0;
          const t = setInterval(() => sse(res, delta({ content: `tick${i++} ` })), 30);
          res.on('close', () => {
            clearInterval(t);
            onForeverClosed();
          });
          return;
        }
        default:
          stream();
          sse(res, delta({ role: 'assistant', reasoning_content: 'Thinking. ' }));
          for (const piece of ['Hello ', 'from ', 'the ', 'fake.']) sse(res, delta({ content: piece }));
          sse(res, delta({}, 'stop'));
          sse(res, { id: 'chatcmpl-1', choices: [], usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 } });
          sse(res, '[DONE]');
          return res.end();
      }
    });
  };
  const served = await listen(handler);
  return { ...served, requests, foreverClosed };
}
