/**
 * A LanguageModelV3 whose every call goes back to the api's inner LLM endpoint
 * (`POST {apiUrl}/inner/api/agent/llm/invoke`, PROTOCOL §3). The backend never holds model
 * credentials: it names provider + model, and the api resolves credentials, meters and bills.
 *
 * Billing idempotency: `invocation_id` is the run id and `call_index` the model request number within
 * the run (passed per call as `providerOptions.dify.call_index`), so a retried call bills once.
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
  LanguageModelV3StreamResult,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { InvokeChunk, type ChunkData, type InvokeRequest, type ToolDefinition } from '../../core/protocol/inner-llm.js';
import type { Usage } from '../../core/protocol/run.js';
import { parseSse } from '../../core/sse.js';
import { ModelCallError } from '../errors.js';
import { fromV3Prompt } from './prompt.js';

/** Who is calling: copied from the run's execution context layer. */
export interface ModelCallerIdentity {
  tenant_id: string;
  user_id: string;
  user_from: 'end-user' | 'account';
  app_id: string;
  invoke_from: string;
  agent_mode?: string;
}

export interface ModelTarget {
  runId: string;
  provider: string;
  model: string;
  caller: ModelCallerIdentity;
}

/** Creates the model of one run. Swappable in tests or for a local demo model. */
export type ModelCaller = (target: ModelTarget) => LanguageModelV3;

/**
 * Dify usage as reported by the inner endpoint, exposed on the `finish` part's providerMetadata
 * (`streamText` passes it on as the `finish-step` part's providerMetadata).
 */
export function difyUsageOf(meta: unknown): Partial<Usage> | undefined {
  const u = (meta as { dify?: { usage?: Partial<Usage> } } | undefined)?.dify?.usage;
  return u && typeof u === 'object' ? u : undefined;
}

/** The raw argument text of a tool call (`providerMetadata.dify.arguments` of its `tool-call` part). */
export function rawToolArgsOf(meta: unknown): string | undefined {
  const a = (meta as { dify?: { arguments?: unknown } } | undefined)?.dify?.arguments;
  return typeof a === 'string' ? a : undefined;
}

export function callIndexOf(options: LanguageModelV3CallOptions): number {
  const v = (options.providerOptions?.dify as { call_index?: unknown } | undefined)?.call_index;
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0;
}

const STATUS_ERROR_TYPES: Record<number, string> = {
  400: 'InvokeBadRequestError',
  401: 'InvokeAuthorizationError',
  403: 'InvokeAuthorizationError',
  429: 'InvokeRateLimitError',
};

export function createInnerLlmCaller(opts: { apiUrl: string; innerApiKey: string; fetch?: typeof fetch }): ModelCaller {
  return (target) => new InnerLlmModel(target, opts.apiUrl.replace(/\/+$/, ''), opts.innerApiKey, opts.fetch ?? fetch);
}

export class InnerLlmModel implements LanguageModelV3 {
  readonly specificationVersion = 'v3' as const;
  readonly provider: string;
  readonly modelId: string;
  readonly supportedUrls: Record<string, RegExp[]> = { 'image/*': [/^https?:\/\/.*$/] };

  constructor(
    private readonly target: ModelTarget,
    private readonly apiUrl: string,
    private readonly innerApiKey: string,
    private readonly fetchImpl: typeof fetch,
  ) {
    this.provider = `dify-inner.${target.provider}`;
    this.modelId = target.model;
  }

  /** Builds the invoke body; model settings come only from the AI SDK call options (the whitelist). */
  buildRequest(options: LanguageModelV3CallOptions): InvokeRequest {
    const params: Record<string, unknown> = {};
    if (options.temperature !== undefined) params.temperature = options.temperature;
    if (options.topP !== undefined) params.top_p = options.topP;
    if (options.presencePenalty !== undefined) params.presence_penalty = options.presencePenalty;
    if (options.frequencyPenalty !== undefined) params.frequency_penalty = options.frequencyPenalty;
    if (options.maxOutputTokens !== undefined) params.max_tokens = options.maxOutputTokens;
    if (options.stopSequences?.length) params.stop_sequences = options.stopSequences;
    const tools: ToolDefinition[] = (options.tools ?? [])
      .filter((t) => t.type === 'function')
      .map((t) => ({
        name: t.name,
        description: (t as { description?: string }).description ?? '',
        parameters: (t as { inputSchema: unknown }).inputSchema as Record<string, unknown>,
      }));
    const { tenant_id, user_id, user_from, app_id, invoke_from, agent_mode } = this.target.caller;
    return {
      caller: {
        invocation_id: this.target.runId,
        agent_run_id: this.target.runId,
        call_index: callIndexOf(options),
        tenant_id,
        user_id,
        user_from,
        app_id,
        invoke_from,
        agent_mode: agent_mode ?? 'agent',
      },
      target: {
        provider: this.target.provider,
        model: this.target.model,
        prompt_messages: fromV3Prompt(options.prompt),
        ...(tools.length ? { tools } : {}),
        model_parameters: params,
        stream: true,
      },
    };
  }

  async doStream(options: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
    const body = this.buildRequest(options);
    const url = `${this.apiUrl}/inner/api/agent/llm/invoke`;
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-inner-api-key': this.innerApiKey },
        body: JSON.stringify(body),
        signal: options.abortSignal,
      });
    } catch (err) {
      if (options.abortSignal?.aborted) throw err;
      throw new ModelCallError('InvokeConnectionError', `inner LLM endpoint unreachable: ${(err as Error).message}`);
    }
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => '');
      let code: string | undefined;
      let message = text.slice(0, 500) || res.statusText;
      try {
        const j = JSON.parse(text) as { code?: unknown; message?: unknown };
        if (typeof j.code === 'string') code = j.code;
        if (typeof j.message === 'string') message = j.message;
      } catch {
        /* not JSON */
      }
      const errorType =
        code && /^Invoke[A-Za-z]*Error$/.test(code)
          ? code
          : (STATUS_ERROR_TYPES[res.status] ?? (res.status >= 500 ? 'InvokeServerUnavailableError' : 'InvokeError'));
      throw new ModelCallError(errorType, `inner LLM invoke failed (${res.status}${code ? ` ${code}` : ''}): ${message}`, res.status);
    }
    return { stream: toPartStream(parseSse(res.body), options.abortSignal), request: { body } };
  }

  async doGenerate(options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
    const { stream } = await this.doStream(options);
    const content: LanguageModelV3Content[] = [];
    let text = '';
    let reasoning = '';
    let finish: Extract<LanguageModelV3StreamPart, { type: 'finish' }> | undefined;
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value.type === 'text-delta') text += value.delta;
      else if (value.type === 'reasoning-delta') reasoning += value.delta;
      else if (value.type === 'tool-call') content.push(value);
      else if (value.type === 'error') throw value.error;
      else if (value.type === 'finish') finish = value;
    }
    if (reasoning) content.unshift({ type: 'reasoning', text: reasoning });
    if (text) content.unshift({ type: 'text', text });
    return {
      content,
      finishReason: finish?.finishReason ?? { unified: 'other', raw: undefined },
      usage: finish?.usage ?? emptyV3Usage(),
      providerMetadata: finish?.providerMetadata,
      warnings: [],
    };
  }
}

function emptyV3Usage(): LanguageModelV3Usage {
  return {
    inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: undefined, text: undefined, reasoning: undefined },
  };
}

const FINISH: Record<string, LanguageModelV3FinishReason['unified']> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
  content_filter: 'content-filter',
  error: 'error',
};

/**
 * Maps inner-LLM chunks to V3 stream parts. Tool calls may arrive whole or in OpenAI-style fragments
 * (same or empty id continues the previous call); they are emitted complete at the end of the stream.
 */
function toPartStream(
  frames: AsyncGenerator<{ data: string }>,
  signal: AbortSignal | undefined,
): ReadableStream<LanguageModelV3StreamPart> {
  let textOpen = false;
  let reasoningOpen = false;
  const calls: Array<{ id: string; name: string; args: string }> = [];
  let usage: Partial<Usage> | undefined;
  let finishRaw: string | undefined;

  let enqueued = 0;
  const push = (ctrl: ReadableStreamDefaultController<LanguageModelV3StreamPart>, part: LanguageModelV3StreamPart) => {
    enqueued++;
    ctrl.enqueue(part);
  };
  const closeOpen = (ctrl: ReadableStreamDefaultController<LanguageModelV3StreamPart>) => {
    if (reasoningOpen) push(ctrl, { type: 'reasoning-end', id: 'reasoning-0' });
    if (textOpen) push(ctrl, { type: 'text-end', id: 'text-0' });
    reasoningOpen = textOpen = false;
  };

  const finish = (ctrl: ReadableStreamDefaultController<LanguageModelV3StreamPart>) => {
    closeOpen(ctrl);
    // The raw argument text also rides along in providerMetadata: the AI SDK hands the loop parsed
    // input, and history keeps the arguments exactly as the model sent them.
    for (const c of calls) {
      const input = c.args || '{}';
      push(ctrl, { type: 'tool-call', toolCallId: c.id, toolName: c.name, input, providerMetadata: { dify: { arguments: input } } });
    }
    const p = usage?.prompt_tokens;
    const o = usage?.completion_tokens;
    push(ctrl, {
      type: 'finish',
      finishReason: { unified: FINISH[finishRaw ?? ''] ?? (calls.length ? 'tool-calls' : 'stop'), raw: finishRaw },
      usage: {
        inputTokens: { total: p, noCache: p, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: o, text: o, reasoning: undefined },
      },
      ...(usage ? { providerMetadata: { dify: { usage: JSON.parse(JSON.stringify(usage)) } } } : {}),
    });
    ctrl.close();
  };

  const handleFrame = (ctrl: ReadableStreamDefaultController<LanguageModelV3StreamPart>, data: string) => {
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      throw new ModelCallError('InvokeError', 'inner LLM endpoint sent a malformed chunk');
    }
    const parsed = InvokeChunk.safeParse(json);
    if (!parsed.success) throw new ModelCallError('InvokeError', 'inner LLM endpoint sent a chunk that does not match the protocol');
    const chunk = parsed.data;
    if (chunk.code !== 0) {
      const d = chunk.data as { error_type: string; message: string };
      throw new ModelCallError(d.error_type || 'InvokeError', d.message || chunk.message);
    }
    const { message, usage: u, finish_reason } = (chunk.data as ChunkData).delta;
    if (message.reasoning_content) {
      if (!reasoningOpen) push(ctrl, { type: 'reasoning-start', id: 'reasoning-0' });
      reasoningOpen = true;
      push(ctrl, { type: 'reasoning-delta', id: 'reasoning-0', delta: message.reasoning_content });
    }
    if (message.content) {
      if (!textOpen) push(ctrl, { type: 'text-start', id: 'text-0' });
      textOpen = true;
      push(ctrl, { type: 'text-delta', id: 'text-0', delta: message.content });
    }
    for (const tc of message.tool_calls ?? []) {
      const last = calls[calls.length - 1];
      if (last && (tc.id === '' || tc.id === last.id)) {
        last.args += tc.function.arguments;
        if (!last.name && tc.function.name) last.name = tc.function.name;
      } else {
        calls.push({ id: tc.id, name: tc.function.name, args: tc.function.arguments });
      }
    }
    if (u) usage = u;
    if (finish_reason) finishRaw = finish_reason;
  };

  return new ReadableStream<LanguageModelV3StreamPart>({
    async start(ctrl) {
      push(ctrl, { type: 'stream-start', warnings: [] });
    },
    // A pull that enqueues nothing is not called again: read frames until one produced a part.
    async pull(ctrl) {
      const before = enqueued;
      try {
        while (enqueued === before) {
          const next = await frames.next();
          if (next.done) return finish(ctrl);
          handleFrame(ctrl, next.value.data);
        }
      } catch (err) {
        if (signal?.aborted) {
          ctrl.error(signal.reason ?? err);
          return;
        }
        closeOpen(ctrl);
        push(ctrl, { type: 'error', error: err instanceof ModelCallError ? err : new ModelCallError('InvokeConnectionError', String((err as Error)?.message ?? err)) });
        ctrl.close();
        void frames.return(undefined);
      }
    },
    async cancel() {
      await frames.return(undefined);
    },
  });
}
