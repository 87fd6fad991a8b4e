/**
 * Fake model providers over real HTTP on 127.0.0.1, each speaking its provider's wire format as its public API
 * reference documents it: OpenAI Responses SSE and chat-completions SSE (also Azure's v1 API and any
 * OpenAI-compatible server), Anthropic Messages SSE with `thinking` and `tool_use` blocks, Gemini
 * `streamGenerateContent?alt=sse`, Bedrock ConverseStream's binary event stream (encoded with
 * @smithy/eventstream-codec), Ollama's /api/chat NDJSON.
 *
 * The scenario is chosen by a marker in the request body (the prompt text): `SCN:hello` (reasoning, then
 * "Hello there!"), `SCN:tool` (a calculator call with streamed arguments; once the request carries
 * `TOOLRESULT-42` or the call's id, the answer "The answer is 42."), `SCN:401`, `SCN:429` (always, Retry-After 0),
 * `SCN:429once` (first call 429 with Retry-After 1, then hello), `SCN:overflow` (the provider's context-length
 * error), `SCN:filter` (Azure's content-filter 400; Gemini's SAFETY finish), `SCN:hang` (one token, then nothing until the client closes: `closed` resolves),
 * `SCN:stall` (headers, then nothing), `SCN:stallonce` (that once, then hello), `SCN:stallmid` (the answer's first
 * word, then nothing; `stalled` records when the client gave up on each),
 * `SCN:think` (a thinking model calling the calculator that enforces its provider's rule on the tool-result turn:
 * fake-thinking.ts; Anthropic, Gemini and OpenAI Responses). A credential containing `bad` gets the 401 whatever the
 * prompt. `pauseNext()` holds the next answer until released (a test kills a process meanwhile).
 */
import http from 'node:http';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { listen, type Served } from '../helpers.js';
import {
  anthropicThink,
  ASK_HUMAN_CALL,
  CALCULATOR_CALL,
  geminiThink,
  openAiThink,
  ThinkingLedger,
  type ThinkOutcome,
} from './fake-thinking.js';

export type Wire = 'openai-responses' | 'openai-chat' | 'anthropic' | 'gemini' | 'bedrock' | 'ollama';

export interface SeenRequest {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface FakeProvider extends Served {
  requests: SeenRequest[];
  /** Resolves when the client closed a `SCN:hang` response. */
  closed: Promise<void>;
  /** When each stalled response (`SCN:stall`, `stallonce`, `stallmid`) was closed by the client, ms since the epoch. */
  stalled: number[];
  /** What `SCN:think` issued and refused. */
  thinking: ThinkingLedger;
  /** Holds the next request's answer: `arrived` resolves when it came, `release()` lets it be answered. */
  pauseNext(): { arrived: Promise<SeenRequest>; release(): void };
  /** The next `times` requests get this answer instead of their scenario's (a provider's documented error body). */
  respondNext(answer: ScriptedAnswer, times?: number): void;
}

/**
 * A scripted answer: a status, headers and body as the provider documents them; `cut` writes the body (a 200
 * stream's first frames) and then destroys the connection.
 */
export interface ScriptedAnswer {
  status: number;
  headers?: Record<string, string>;
  body: string | Uint8Array | (string | Uint8Array)[];
  cut?: boolean;
}

/** Usage every successful answer reports: 20 prompt tokens (8 from cache), 10 completion tokens (3 reasoning). */
export const USAGE = { prompt: 20, cached: 8, completion: 10, reasoning: 3 };

type Step =
  | { kind: 'reasoning'; text: string }
  | { kind: 'text'; text: string }
  | { kind: 'tool'; id: string; name: string; args: string[] }
  | { kind: 'finish'; reason: 'stop' | 'tool' };

interface Encoder {
  contentType: string;
  /** The whole stream of one answer, as frames written one by one. */
  frames(steps: Step[], model: string): (string | Uint8Array)[];
  /** Status and body of an error response. */
  error(status: 401 | 429 | 400, kind: 'auth' | 'rate' | 'overflow'): { body: string; headers?: Record<string, string> };
}

const sse = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

// ---- OpenAI Responses (platform.openai.com/docs/api-reference/responses-streaming) -----------------------------
const openAiResponses: Encoder = {
  contentType: 'text/event-stream',
  frames(steps, model) {
    const out: string[] = [];
    const base = { id: 'resp_1', object: 'response', created_at: 1_760_000_000, model, output: [], usage: null, status: 'in_progress' };
    out.push(sse({ type: 'response.created', response: base, sequence_number: 0 }));
    let i = 0;
    const calls: unknown[] = [];
    for (const s of steps) {
      if (s.kind === 'reasoning') {
        out.push(sse({ type: 'response.output_item.added', output_index: i, item: { type: 'reasoning', id: 'rs_1', summary: [] } }));
        out.push(
          sse({
            type: 'response.reasoning_summary_part.added',
            item_id: 'rs_1',
            output_index: i,
            summary_index: 0,
            part: { type: 'summary_text', text: '' },
          }),
        );
        out.push(sse({ type: 'response.reasoning_summary_text.delta', item_id: 'rs_1', output_index: i, summary_index: 0, delta: s.text }));
        out.push(
          sse({
            type: 'response.reasoning_summary_part.done',
            item_id: 'rs_1',
            output_index: i,
            summary_index: 0,
            part: { type: 'summary_text', text: s.text },
          }),
        );
        out.push(
          sse({
            type: 'response.output_item.done',
            output_index: i,
            item: { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: s.text }] },
          }),
        );
        i++;
      } else if (s.kind === 'text') {
        out.push(
          sse({
            type: 'response.output_item.added',
            output_index: i,
            item: { type: 'message', id: 'msg_1', role: 'assistant', status: 'in_progress', content: [] },
          }),
        );
        for (const d of s.text.match(/.{1,6}/gs) ?? [])
          out.push(
            sse({ type: 'response.output_text.delta', item_id: 'msg_1', output_index: i, content_index: 0, delta: d, logprobs: [] }),
          );
        out.push(
          sse({
            type: 'response.output_item.done',
            output_index: i,
            item: {
              type: 'message',
              id: 'msg_1',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: s.text, annotations: [] }],
            },
          }),
        );
        i++;
      } else if (s.kind === 'tool') {
        const item = { type: 'function_call', id: 'fc_1', call_id: s.id, name: s.name, arguments: '', status: 'in_progress' };
        out.push(sse({ type: 'response.output_item.added', output_index: i, item }));
        for (const d of s.args)
          out.push(sse({ type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: i, delta: d }));
        const done = { ...item, arguments: s.args.join(''), status: 'completed' };
        calls.push(done);
        out.push(sse({ type: 'response.output_item.done', output_index: i, item: done }));
        i++;
      } else {
        const usage = {
          input_tokens: USAGE.prompt,
          input_tokens_details: { cached_tokens: USAGE.cached },
          output_tokens: USAGE.completion,
          output_tokens_details: { reasoning_tokens: USAGE.reasoning },
          total_tokens: USAGE.prompt + USAGE.completion,
        };
        out.push(sse({ type: 'response.completed', response: { ...base, status: 'completed', output: calls, usage } }));
      }
    }
    return out;
  },
  error(status, kind) {
    const e =
      kind === 'auth'
        ? { message: 'Incorrect API key provided: sk-fake***.', type: 'invalid_request_error', code: 'invalid_api_key' }
        : kind === 'rate'
          ? { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' }
          : {
              message: 'Your input exceeds the context window of this model.',
              type: 'invalid_request_error',
              code: 'context_length_exceeded',
            };
    return { body: JSON.stringify({ error: { ...e, param: null } }) };
  },
};

// ---- OpenAI chat completions (also Azure v1 and OpenAI-compatible servers) ------------------------------------
const openAiChat: Encoder = {
  contentType: 'text/event-stream',
  frames(steps, model) {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: unknown) =>
      sse({
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1_760_000_000,
        model,
        choices: [{ index: 0, delta, finish_reason: finish }],
        ...(usage ? { usage } : {}),
      });
    const out: string[] = [];
    for (const s of steps) {
      if (s.kind === 'reasoning') out.push(chunk({ role: 'assistant', reasoning_content: s.text }));
      else if (s.kind === 'text') for (const d of s.text.match(/.{1,6}/gs) ?? []) out.push(chunk({ content: d }));
      else if (s.kind === 'tool') {
        out.push(chunk({ tool_calls: [{ index: 0, id: s.id, type: 'function', function: { name: s.name, arguments: '' } }] }));
        for (const d of s.args) out.push(chunk({ tool_calls: [{ index: 0, function: { arguments: d } }] }));
      } else {
        out.push(chunk({}, s.reason === 'tool' ? 'tool_calls' : 'stop'));
        out.push(
          sse({
            id: 'chatcmpl-1',
            object: 'chat.completion.chunk',
            created: 1_760_000_000,
            model,
            choices: [],
            usage: {
              prompt_tokens: USAGE.prompt,
              completion_tokens: USAGE.completion,
              total_tokens: USAGE.prompt + USAGE.completion,
              prompt_tokens_details: { cached_tokens: USAGE.cached },
              completion_tokens_details: { reasoning_tokens: USAGE.reasoning },
            },
          }),
        );
        out.push('data: [DONE]\n\n');
      }
    }
    return out;
  },
  error: openAiResponses.error,
};

// ---- Anthropic Messages (docs.anthropic.com/en/api/messages-streaming) ----------------------------------------
const anthropic: Encoder = {
  contentType: 'text/event-stream',
  frames(steps, model) {
    const out: string[] = [];
    const ev = (type: string, data: Record<string, unknown>) => out.push(sse({ type, ...data }, type));
    ev('message_start', {
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: USAGE.prompt - USAGE.cached,
          cache_read_input_tokens: USAGE.cached,
          cache_creation_input_tokens: 0,
          output_tokens: 1,
        },
      },
    });
    let index = 0;
    for (const s of steps) {
      if (s.kind === 'reasoning') {
        ev('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: s.text } });
        ev('content_block_delta', { index, delta: { type: 'signature_delta', signature: 'c2lnbmF0dXJl' } });
        ev('content_block_stop', { index: index++ });
      } else if (s.kind === 'text') {
        ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const d of s.text.match(/.{1,6}/gs) ?? []) ev('content_block_delta', { index, delta: { type: 'text_delta', text: d } });
        ev('content_block_stop', { index: index++ });
      } else if (s.kind === 'tool') {
        ev('content_block_start', { index, content_block: { type: 'tool_use', id: s.id, name: s.name, input: {} } });
        for (const d of s.args) ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: d } });
        ev('content_block_stop', { index: index++ });
      } else {
        ev('message_delta', {
          delta: { stop_reason: s.reason === 'tool' ? 'tool_use' : 'end_turn', stop_sequence: null },
          usage: { output_tokens: USAGE.completion },
        });
        ev('message_stop', {});
      }
    }
    return out;
  },
  error(_status, kind) {
    const e =
      kind === 'auth'
        ? { type: 'authentication_error', message: 'invalid x-api-key' }
        : kind === 'rate'
          ? { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' }
          : { type: 'invalid_request_error', message: 'prompt is too long: 250000 tokens > 200000 maximum' };
    return { body: JSON.stringify({ type: 'error', error: e }) };
  },
};

// ---- Gemini streamGenerateContent?alt=sse (ai.google.dev/api/generate-content) -------------------------------
const gemini: Encoder = {
  contentType: 'text/event-stream',
  frames(steps) {
    const out: string[] = [];
    const cand = (parts: unknown[], finishReason?: string) => ({
      content: { role: 'model', parts },
      ...(finishReason ? { finishReason } : {}),
      index: 0,
    });
    const usageMetadata = {
      promptTokenCount: USAGE.prompt,
      cachedContentTokenCount: USAGE.cached,
      candidatesTokenCount: USAGE.completion - USAGE.reasoning,
      thoughtsTokenCount: USAGE.reasoning,
      totalTokenCount: USAGE.prompt + USAGE.completion,
    };
    let toolCalled = false;
    for (const s of steps) {
      if (s.kind === 'reasoning') out.push(sse({ candidates: [cand([{ text: s.text, thought: true }])] }));
      else if (s.kind === 'text') for (const d of s.text.match(/.{1,6}/gs) ?? []) out.push(sse({ candidates: [cand([{ text: d }])] }));
      else if (s.kind === 'tool') {
        toolCalled = true;
        // Gemini sends a function call whole (no argument fragments).
        out.push(sse({ candidates: [cand([{ functionCall: { name: s.name, args: JSON.parse(s.args.join('')) } }])] }));
      } else out.push(sse({ candidates: [cand([{ text: '' }], 'STOP')], usageMetadata, modelVersion: 'gemini' }));
    }
    void toolCalled;
    return out;
  },
  error(status, kind) {
    const e =
      kind === 'auth'
        ? { code: 403, message: 'API key not valid. Please pass a valid API key.', status: 'PERMISSION_DENIED' }
        : kind === 'rate'
          ? { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' }
          : {
              code: 400,
              message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).',
              status: 'INVALID_ARGUMENT',
            };
    void status;
    return { body: JSON.stringify({ error: e }) };
  },
};

// ---- Bedrock ConverseStream (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html) --
const fromUtf8 = (text: string) => new TextEncoder().encode(text);
const codec = new EventStreamCodec((bytes) => new TextDecoder().decode(bytes), fromUtf8);
const awsEvent = (eventType: string, payload: unknown): Uint8Array =>
  codec.encode({
    headers: {
      ':event-type': { type: 'string', value: eventType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
const bedrock: Encoder = {
  contentType: 'application/vnd.amazon.eventstream',
  frames(steps) {
    const out: Uint8Array[] = [awsEvent('messageStart', { role: 'assistant' })];
    let index = 0;
    for (const s of steps) {
      if (s.kind === 'reasoning') {
        out.push(awsEvent('contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { text: s.text } } }));
        out.push(awsEvent('contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { signature: 'c2ln' } } }));
        out.push(awsEvent('contentBlockStop', { contentBlockIndex: index++ }));
      } else if (s.kind === 'text') {
        for (const d of s.text.match(/.{1,6}/gs) ?? [])
          out.push(awsEvent('contentBlockDelta', { contentBlockIndex: index, delta: { text: d } }));
        out.push(awsEvent('contentBlockStop', { contentBlockIndex: index++ }));
      } else if (s.kind === 'tool') {
        out.push(awsEvent('contentBlockStart', { contentBlockIndex: index, start: { toolUse: { toolUseId: s.id, name: s.name } } }));
        for (const d of s.args) out.push(awsEvent('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: d } } }));
        out.push(awsEvent('contentBlockStop', { contentBlockIndex: index++ }));
      } else {
        out.push(awsEvent('messageStop', { stopReason: s.reason === 'tool' ? 'tool_use' : 'end_turn' }));
        out.push(
          awsEvent('metadata', {
            usage: {
              inputTokens: USAGE.prompt - USAGE.cached,
              cacheReadInputTokens: USAGE.cached,
              outputTokens: USAGE.completion,
              totalTokens: USAGE.prompt + USAGE.completion,
            },
            metrics: { latencyMs: 12 },
          }),
        );
      }
    }
    return out;
  },
  error(_status, kind) {
    const [type, message] =
      kind === 'auth'
        ? ['UnrecognizedClientException', 'The security token included in the request is invalid.']
        : kind === 'rate'
          ? ['ThrottlingException', 'Too many requests, please wait before trying again.']
          : ['ValidationException', 'Input is too long for requested model.'];
    return {
      body: JSON.stringify({ message }),
      headers: { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` },
    };
  },
};

// ---- Ollama /api/chat (github.com/ollama/ollama/blob/main/docs/api.md) ---------------------------------------
const ollama: Encoder = {
  contentType: 'application/x-ndjson',
  frames(steps, model) {
    const line = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        model,
        created_at: '2026-12-01T00:00:00Z',
        message: { role: 'assistant', content: '', ...message },
        done: false,
        ...extra,
      }) + '\n';
    const out: string[] = [];
    for (const s of steps) {
      if (s.kind === 'reasoning') out.push(line({ thinking: s.text }));
      else if (s.kind === 'text') for (const d of s.text.match(/.{1,6}/gs) ?? []) out.push(line({ content: d }));
      else if (s.kind === 'tool') out.push(line({ tool_calls: [{ function: { name: s.name, arguments: JSON.parse(s.args.join('')) } }] }));
      else
        out.push(
          line(
            {},
            {
              done: true,
              done_reason: 'stop',
              total_duration: 1,
              load_duration: 1,
              prompt_eval_count: USAGE.prompt,
              prompt_eval_duration: 1,
              eval_count: USAGE.completion,
              eval_duration: 1,
            },
          ),
        );
    }
    return out;
  },
  error(_status, kind) {
    const message =
      kind === 'auth' ? 'unauthorized' : kind === 'rate' ? 'too many requests' : 'the input length exceeds the context length';
    return { body: JSON.stringify({ error: message }) };
  },
};

const ENCODERS: Record<Wire, Encoder> = {
  'openai-responses': openAiResponses,
  'openai-chat': openAiChat,
  anthropic,
  gemini,
  bedrock,
  ollama,
};

const HELLO: Step[] = [
  { kind: 'reasoning', text: 'The user greets me.' },
  { kind: 'text', text: 'Hello there!' },
  { kind: 'finish', reason: 'stop' },
];
/** The id of the scripted calculator call (echoed back by the client with the call's result). */
export const TOOL_CALL_ID = 'call_calc_1';
const TOOL: Step[] = [
  { kind: 'tool', id: TOOL_CALL_ID, name: 'calculator', args: ['{"expres', 'sion":"6*7"}'] },
  { kind: 'finish', reason: 'tool' },
];
const AFTER_TOOL: Step[] = [
  { kind: 'text', text: 'The answer is 42.' },
  { kind: 'finish', reason: 'stop' },
];

/** Embeddings in the provider's format: one 3-dimensional vector per input, the input's index in the first place. */
function embeddings(wire: Wire, raw: string, res: http.ServerResponse): void {
  const body = JSON.parse(raw) as { input?: string | string[]; requests?: unknown[] };
  const n = body.requests?.length ?? (Array.isArray(body.input) ? body.input.length : 1);
  const vectors = Array.from({ length: n }, (_, i) => [i, 0.5, 1]);
  const out =
    wire === 'gemini'
      ? { embeddings: vectors.map((values) => ({ values })) }
      : wire === 'ollama'
        ? { model: 'embed', embeddings: vectors, total_duration: 1, load_duration: 1, prompt_eval_count: n }
        : {
            object: 'list',
            model: 'embed',
            data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
            usage: { prompt_tokens: n, total_tokens: n },
          };
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
}

export async function startFakeProvider(wire: Wire): Promise<FakeProvider> {
  const enc = ENCODERS[wire];
  const requests: SeenRequest[] = [];
  let onClosed!: () => void;
  const closed = new Promise<void>((r) => (onClosed = r));
  let once429 = 0;
  let stallOnce = 0;
  const script: ScriptedAnswer[] = [];
  const stalled: number[] = [];
  const thinking = new ThinkingLedger();
  let pause: { arrived: (r: SeenRequest) => void; released: Promise<void> } | null = null;

  const handler: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const seen = { url: req.url ?? '', headers: req.headers, body };
      requests.push(seen);
      if (pause) {
        const p = pause;
        pause = null;
        p.arrived(seen);
        await p.released;
      }
      const scripted = script.shift();
      if (scripted) {
        res.writeHead(scripted.status, { 'content-type': 'application/json', ...scripted.headers });
        for (const part of Array.isArray(scripted.body) ? scripted.body : [scripted.body]) res.write(part);
        if (scripted.cut) setTimeout(() => res.destroy(), 20);
        else res.end();
        return;
      }
      const model =
        /"model"\s*:\s*"([^"]+)"/.exec(body)?.[1] ?? decodeURIComponent(/\/models?\/([^/:]+)/.exec(req.url ?? '')?.[1] ?? 'model');
      // A credential with `bad` in it (`sk-bad-…`) is refused, whatever the prompt (the console's credential check).
      // Only as a word of its own: a SigV4 signature (Bedrock's Authorization header, 64 hex digits signed afresh for
      // every request) holds "bad" in ~1.5 % of requests, which once failed a retried Bedrock call as a 401.
      const credential = `${req.headers.authorization ?? ''} ${String(req.headers['x-api-key'] ?? '')} ${String(req.headers['x-goog-api-key'] ?? '')}`;
      const scenario = /(?:^|[^A-Za-z0-9+/=])bad/.test(credential) ? '401' : (/SCN:(\w+)/.exec(body)?.[1] ?? 'hello');
      if (/embed/i.test(req.url ?? '')) return embeddings(wire, body, res);
      const fail = (status: 401 | 429 | 400, kind: 'auth' | 'rate' | 'overflow', extra: Record<string, string> = {}) => {
        const e = enc.error(status, kind);
        res.writeHead(status, { 'content-type': 'application/json', ...e.headers, ...extra }).end(e.body);
      };
      const stall = () => {
        res.writeHead(200, { 'content-type': enc.contentType, 'cache-control': 'no-cache' });
        res.flushHeaders();
        res.on('close', () => stalled.push(Date.now()));
      };
      const stream = (steps: Step[], hang = false) => {
        res.writeHead(200, { 'content-type': enc.contentType, 'cache-control': 'no-cache' });
        const frames = enc.frames(steps, model);
        if (hang) {
          res.write(frames[1] ?? frames[0]!);
          res.on('close', () => onClosed());
          return;
        }
        for (const f of frames) res.write(f);
        res.end();
      };
      switch (scenario) {
        case '401':
          return fail(401, 'auth');
        case '429':
          return fail(429, 'rate', { 'retry-after': '0' });
        case '429once':
          if (once429++ === 0) return fail(429, 'rate', { 'retry-after': '1' });
          return stream(HELLO);
        case 'overflow':
          return fail(400, 'overflow');
        case 'filter':
          // Azure's content management refuses the prompt with a 400; Gemini ends the stream with finishReason SAFETY.
          if (wire === 'gemini') {
            res.writeHead(200, { 'content-type': enc.contentType });
            return res.end(sse({ candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'SAFETY', index: 0 }] }));
          }
          return res.writeHead(400, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              error: {
                code: 'content_filter',
                message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
                innererror: { code: 'ResponsibleAIPolicyViolation' },
              },
            }),
          );
        case 'tool':
          // A follow-up carries the tool's result: `TOOLRESULT-42` from a unit test, or (on the real stack, where the
          // calculator answers `42`) the call's id echoed back with it, or Ollama's id-less `tool` message.
          return stream(
            body.includes('TOOLRESULT-42') || body.includes(TOOL_CALL_ID) || (wire === 'ollama' && /"role"\s*:\s*"tool"/.test(body))
              ? AFTER_TOOL
              : TOOL,
          );
        case 'hang':
          return stream(HELLO, true);
        case 'stall':
          // Headers, then nothing: no first token, ever (every attempt).
          return stall();
        case 'stallonce':
          if (stallOnce++ === 0) return stall();
          return stream(HELLO);
        case 'stallmid': {
          // The answer's first words, then silence: a stream that stalls mid-answer.
          res.writeHead(200, { 'content-type': enc.contentType, 'cache-control': 'no-cache' });
          const frames = enc.frames(HELLO, model);
          const upTo = frames.findIndex((f) => Buffer.from(f).toString('latin1').includes('Hello'));
          for (const f of frames.slice(0, upTo + 1)) res.write(f);
          res.on('close', () => stalled.push(Date.now()));
          return;
        }
        case 'think':
        case 'thinkask': {
          const parsed = JSON.parse(body);
          const tool = scenario === 'think' ? CALCULATOR_CALL : ASK_HUMAN_CALL;
          const outcome: ThinkOutcome =
            wire === 'anthropic'
              ? anthropicThink(thinking, parsed, tool)
              : wire === 'gemini'
                ? geminiThink(thinking, parsed, tool)
                : wire === 'openai-responses'
                  ? openAiThink(thinking, parsed, tool)
                  : { kind: 'error', status: 400, body: { error: { message: `SCN:think is not scripted for ${wire}` } } };
          if (outcome.kind === 'error')
            return res
              .writeHead(outcome.status, { 'content-type': 'application/json', ...outcome.headers })
              .end(JSON.stringify(outcome.body));
          res.writeHead(200, { 'content-type': enc.contentType, 'cache-control': 'no-cache' });
          for (const f of outcome.frames) res.write(f);
          return res.end();
        }
        default:
          return stream(HELLO);
      }
    });
  };
  const served = await listen(handler);
  return {
    ...served,
    requests,
    closed,
    stalled,
    thinking,
    respondNext(answer, times = 1) {
      for (let i = 0; i < times; i++) script.push(answer);
    },
    pauseNext() {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let arrived!: (r: SeenRequest) => void;
      const came = new Promise<SeenRequest>((r) => (arrived = r));
      pause = { arrived, released };
      return { arrived: came, release };
    },
  };
}

/** The frames of the `SCN:hello` answer in `wire`'s format (a cut stream's first frames) and its content type. */
export function helloFrames(wire: Wire, model = 'model'): { contentType: string; frames: (string | Uint8Array)[] } {
  return { contentType: ENCODERS[wire].contentType, frames: ENCODERS[wire].frames(HELLO, model) };
}
