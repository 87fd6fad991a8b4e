/**
 * Any OpenAI-style `/chat/completions` endpoint (OpenAI, Ollama, vLLM, LM Studio, ...), streamed with
 * plain fetch + parseSse so every byte, error and abort is under our control. Credentials come from
 * the tenant (`{base_url, api_key?}`, unbilled) or from OPENAI_COMPATIBLE_* (system-hosted, billed).
 */
import { z } from 'zod';
import type { PromptMessage, ToolCall } from '../../protocol/inner-llm.js';
import { parseSse } from '../../sse.js';
import { InvokeError } from '../errors.js';
import { priceFor } from '../pricing.js';
import type { FinishReason, LlmProvider, ModelInfo, ProviderEmbedRequest, ProviderEvent, ProviderInvokeRequest } from '../provider.js';

export const OPENAI_COMPATIBLE_PROVIDER = 'openai_compatible';

export const OpenAiCompatibleCredentials = z
  .object({
    base_url: z.url(),
    api_key: z.string().optional(),
  })
  .strict();
export type OpenAiCompatibleCredentials = z.infer<typeof OpenAiCompatibleCredentials>;

export interface OpenAiCompatibleOptions {
  /** System-hosted endpoint (OPENAI_COMPATIBLE_BASE_URL), e.g. http://127.0.0.1:11434/v1. */
  baseUrl?: string;
  apiKey?: string;
  /** The model offered in model lists (OPENAI_COMPATIBLE_MODEL); other names are passed through. */
  model?: string;
  /** Injected for tests. */
  fetch?: typeof fetch;
}

/** Model names are passed to the endpoint as-is; this only keeps obvious garbage out. */
const MODEL_NAME = /^[\w.:/@+-]{1,200}$/;

/** Model settings forwarded to the endpoint (the agent backend's whitelist, OpenAI names). */
const PARAMETER_NAMES: Record<string, string> = {
  temperature: 'temperature',
  top_p: 'top_p',
  presence_penalty: 'presence_penalty',
  frequency_penalty: 'frequency_penalty',
  max_tokens: 'max_tokens',
  stop_sequences: 'stop',
  stop: 'stop',
  seed: 'seed',
};

export function createOpenAiCompatibleProvider(opts: OpenAiCompatibleOptions = {}): LlmProvider {
  const doFetch = opts.fetch ?? fetch;
  const info = (model: string): ModelInfo => ({
    model,
    label: model,
    supports_vision: true,
    supports_tools: true,
    context_window: 128_000,
    pricing: priceFor(OPENAI_COMPATIBLE_PROVIDER, model),
  });
  return {
    name: OPENAI_COMPATIBLE_PROVIDER,
    models: () => (opts.model ? [info(opts.model)] : []),
    resolveModel: (model) => (MODEL_NAME.test(model) ? info(model) : undefined),
    hasSystemCredentials: () => Boolean(opts.baseUrl),
    parseCredentials: (raw) => {
      const r = OpenAiCompatibleCredentials.safeParse(raw);
      if (!r.success) throw new Error(r.error.issues.map((i) => `credentials.${i.path.join('.')}: ${i.message}`).join('; '));
      return r.data;
    },
    invoke: (req) => streamChat(doFetch, opts, req),
    embed: (req) => embedTexts(doFetch, opts, req),
  };
}

const EmbeddingsResponse = z.object({ data: z.array(z.object({ index: z.number().int(), embedding: z.array(z.number()) })) });

/** POST /embeddings (knowledge retrieval): vectors in input order. */
async function embedTexts(doFetch: typeof fetch, opts: OpenAiCompatibleOptions, req: ProviderEmbedRequest): Promise<number[][]> {
  const parsed = req.credentials ? OpenAiCompatibleCredentials.safeParse(req.credentials) : null;
  if (parsed && !parsed.success) throw new InvokeError('InvokeAuthorizationError', 'the saved openai_compatible credentials are invalid');
  const creds: OpenAiCompatibleCredentials = parsed?.data ?? { base_url: opts.baseUrl ?? '', api_key: opts.apiKey };
  if (!creds.base_url) throw new InvokeError('InvokeAuthorizationError', 'openai_compatible has no base URL configured');
  const redact = (text: string) => (creds.api_key ? text.split(creds.api_key).join('[redacted]') : text);
  const url = `${creds.base_url.replace(/\/+$/, '')}/embeddings`;
  let res: Response;
  try {
    res = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(creds.api_key ? { authorization: `Bearer ${creds.api_key}` } : {}) },
      body: JSON.stringify({ model: req.model, input: req.texts }),
      signal: req.signal,
    });
  } catch (err) {
    if (req.signal.aborted) throw req.signal.reason;
    throw new InvokeError('InvokeConnectionError', redact(`cannot reach ${url}: ${describe(err)}`));
  }
  if (!res.ok) throw new InvokeError(httpErrorKind(res.status), `upstream ${res.status}: ${redact(await errorDetail(res))}`);
  const body = EmbeddingsResponse.safeParse(await res.json().catch(() => null));
  if (!body.success || body.data.data.length !== req.texts.length)
    throw new InvokeError('InvokeError', 'upstream sent a malformed embeddings response');
  return [...body.data.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
}

// ---- request ---------------------------------------------------------------------------------

export function toOpenAiMessages(messages: PromptMessage[]): unknown[] {
  return messages.map((m) => {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: m.content };
      case 'user':
        return {
          role: 'user',
          content:
            typeof m.content === 'string'
              ? m.content
              : m.content.map((p) =>
                  p.type === 'text'
                    ? { type: 'text', text: p.data }
                    : {
                        type: 'image_url',
                        image_url: { url: p.url ?? `data:${p.mime_type ?? 'image/png'};base64,${p.base64_data ?? ''}` },
                      },
                ),
        };
      case 'assistant':
        return {
          role: 'assistant',
          content: m.content || (m.tool_calls?.length ? null : ''),
          ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}),
        };
      case 'tool':
        return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
    }
  });
}

function buildBody(req: ProviderInvokeRequest): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: req.model,
    messages: toOpenAiMessages(req.prompt_messages),
    stream: true,
    stream_options: { include_usage: true },
  };
  for (const [key, value] of Object.entries(req.model_parameters)) {
    const name = PARAMETER_NAMES[key];
    if (name && value !== undefined && value !== null) body[name] = value;
  }
  if (req.tools.length > 0) {
    body.tools = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }
  return body;
}

// ---- response --------------------------------------------------------------------------------

interface StreamChunk {
  choices?: {
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: { message?: string; type?: string; code?: unknown };
}

async function* streamChat(
  doFetch: typeof fetch,
  opts: OpenAiCompatibleOptions,
  req: ProviderInvokeRequest,
): AsyncGenerator<ProviderEvent> {
  const parsed = req.credentials ? OpenAiCompatibleCredentials.safeParse(req.credentials) : null;
  if (parsed && !parsed.success) throw new InvokeError('InvokeAuthorizationError', 'the saved openai_compatible credentials are invalid');
  const creds: OpenAiCompatibleCredentials = parsed?.data ?? { base_url: opts.baseUrl ?? '', api_key: opts.apiKey };
  if (!creds.base_url) throw new InvokeError('InvokeAuthorizationError', 'openai_compatible has no base URL configured');
  const redact = (text: string) => (creds.api_key ? text.split(creds.api_key).join('[redacted]') : text);
  const url = `${creds.base_url.replace(/\/+$/, '')}/chat/completions`;
  let res: Response;
  try {
    res = await doFetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(creds.api_key ? { authorization: `Bearer ${creds.api_key}` } : {}),
      },
      body: JSON.stringify(buildBody(req)),
      signal: req.signal,
    });
  } catch (err) {
    if (req.signal.aborted) throw req.signal.reason;
    throw new InvokeError('InvokeConnectionError', redact(`cannot reach ${url}: ${describe(err)}`));
  }
  if (!res.ok) {
    const detail = redact(await errorDetail(res));
    throw new InvokeError(httpErrorKind(res.status), `upstream ${res.status}: ${detail}`);
  }
  if (!res.body) throw new InvokeError('InvokeConnectionError', 'upstream sent no body');

  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  let finish: FinishReason | undefined;
  let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
  let done = false;
  try {
    for await (const frame of parseSse(res.body)) {
      if (frame.data === '[DONE]') {
        done = true;
        break;
      }
      let chunk: StreamChunk;
      try {
        chunk = JSON.parse(frame.data) as StreamChunk;
      } catch {
        throw new InvokeError('InvokeConnectionError', 'upstream sent a malformed stream chunk');
      }
      if (chunk.error) throw new InvokeError('InvokeServerUnavailableError', redact(`upstream error: ${chunk.error.message ?? 'unknown'}`));
      if (chunk.usage) {
        usage = { prompt_tokens: chunk.usage.prompt_tokens ?? 0, completion_tokens: chunk.usage.completion_tokens ?? 0 };
      }
      for (const choice of chunk.choices ?? []) {
        const d = choice.delta ?? {};
        const reasoning = d.reasoning_content ?? d.reasoning;
        if (reasoning) yield { type: 'delta', reasoning_content: reasoning };
        if (d.content) yield { type: 'delta', content: d.content };
        for (const tc of d.tool_calls ?? []) {
          const index = tc.index ?? 0;
          const acc = calls.get(index) ?? { id: '', name: '', arguments: '' };
          if (tc.id) acc.id = tc.id;
          if (tc.function?.name) acc.name += tc.function.name;
          if (tc.function?.arguments) acc.arguments += tc.function.arguments;
          calls.set(index, acc);
        }
        if (choice.finish_reason) finish = mapFinish(choice.finish_reason);
      }
    }
  } catch (err) {
    if (req.signal.aborted) throw req.signal.reason;
    if (err instanceof InvokeError) throw err;
    throw new InvokeError('InvokeConnectionError', redact(`upstream stream broke: ${describe(err)}`));
  }
  if (!done && !finish) throw new InvokeError('InvokeConnectionError', 'upstream stream ended before the response was complete');

  if (calls.size > 0) {
    // Tool calls are sent whole (id, name, complete JSON arguments) in one delta, never as fragments.
    const toolCalls: ToolCall[] = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, c]) => ({
        id: c.id || `call_${index}`,
        type: 'function' as const,
        function: { name: c.name, arguments: c.arguments || '{}' },
      }));
    yield { type: 'delta', tool_calls: toolCalls };
  }
  yield { type: 'finish', finish_reason: finish ?? (calls.size > 0 ? 'tool_calls' : 'stop'), usage };
}

export function httpErrorKind(status: number): InvokeError['errorType'] {
  if (status === 429) return 'InvokeRateLimitError';
  if (status === 401 || status === 403) return 'InvokeAuthorizationError';
  if (status >= 500) return 'InvokeServerUnavailableError';
  if (status >= 400) return 'InvokeBadRequestError';
  return 'InvokeError';
}

function mapFinish(reason: string): FinishReason {
  if (reason === 'length' || reason === 'tool_calls' || reason === 'content_filter') return reason;
  if (reason === 'function_call') return 'tool_calls';
  return 'stop';
}

async function errorDetail(res: Response): Promise<string> {
  let text = '';
  try {
    text = (await res.text()).slice(0, 2000);
  } catch {
    return res.statusText;
  }
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string; message?: string };
    const m = typeof j.error === 'string' ? j.error : (j.error?.message ?? j.message);
    if (m) return m.slice(0, 500);
  } catch {
    /* not JSON */
  }
  return text.slice(0, 500) || res.statusText;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as Error & { cause?: unknown }).cause;
    const c = cause instanceof Error ? `: ${cause.message}` : '';
    return `${err.message}${c}`;
  }
  return String(err);
}
