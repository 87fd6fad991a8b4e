/**
 * A LanguageModelV3 whose every call goes back to the api's inner LLM endpoint
 * (`POST {apiUrl}/inner/api/agent/llm/invoke`, docs/PROTOCOL.md §3). The backend never holds model
 * credentials: it names provider + model, and the api resolves credentials, meters and bills.
 *
 * Billing idempotency: `invocation_id` is the run id and `call_index` the model request number within
 * the run (passed per call as `providerOptions.dify.call_index`), so a retried call bills once.
 *
 * Transport failures are retried here (the api may crash or restart mid-call; another replica may
 * answer): connection refused/reset, a 5xx before streaming, or a stream cut before its final chunk. The same
 * request (same invocation_id + call_index) is sent again with backoff, for at most
 * `retry.budgetMs` per failure episode, and the replayed stream is deduplicated by position: text
 * and reasoning characters already emitted are skipped (and must match, else the call fails as
 * `InvokeConnectionError`: the answer cannot be un-sent), tool calls and usage are taken from the
 * attempt that finishes. So the run sees one continuous answer and one usage report, and the
 * gateway's ledger (unique on the billing request id) charges once. A 4xx or an error chunk (negative
 * code) is the model's answer, not a transport failure: never retried.
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
import type { Logger } from '../../core/logger.js';
import { ModelCallError } from '../errors.js';
import { fromV3Prompt } from './prompt.js';
import { redactSecrets } from '../../core/llm/redact.js';

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

/** The gateway's refusal of a call when the tenant's model credits are used up (docs/PROTOCOL.md §3). */
const QUOTA_EXCEEDED = 'agent_llm_quota_exceeded';

export interface InnerLlmRetryOptions {
  /** How long one failure episode may last (first failure → last attempt), ms. 0: no retries. */
  budgetMs: number;
  /** Backoff between attempts: doubles from `baseMs` up to `maxMs`. */
  baseMs: number;
  maxMs: number;
}

/** 60 s: an api restart, or a PostgreSQL restart/failover behind the gateway (10–60 s). */
export const DEFAULT_INNER_LLM_RETRY: InnerLlmRetryOptions = { budgetMs: 60_000, baseMs: 250, maxMs: 4_000 };

export function createInnerLlmCaller(opts: {
  apiUrl: string;
  innerApiKey: string;
  fetch?: typeof fetch;
  retry?: Partial<InnerLlmRetryOptions>;
  logger?: Logger;
}): ModelCaller {
  const retry = { ...DEFAULT_INNER_LLM_RETRY, ...opts.retry };
  return (target) => new InnerLlmModel(target, opts.apiUrl.replace(/\/+$/, ''), opts.innerApiKey, opts.fetch ?? fetch, retry, opts.logger);
}

/** A failure of the way to the inner endpoint (not of the model): worth sending the same call again. */
class TransportFailure extends ModelCallError {}

/** Backoff within one failure episode; progress (new output) starts a fresh episode. */
class RetryBudget {
  private since: number | null = null;
  private delay: number;
  attempts = 0;
  constructor(private readonly opts: InnerLlmRetryOptions) {
    this.delay = opts.baseMs;
  }
  /** Sleeps before the next attempt; false when the episode's budget is spent. */
  async wait(signal: AbortSignal | undefined): Promise<boolean> {
    const now = Date.now();
    this.since ??= now;
    if (now - this.since + this.delay > this.opts.budgetMs) return false;
    await abortableSleep(this.delay, signal);
    this.delay = Math.min(this.delay * 2, this.opts.maxMs);
    this.attempts++;
    return true;
  }
  progress(): void {
    this.since = null;
    this.delay = this.opts.baseMs;
  }
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
    private readonly retry: InnerLlmRetryOptions = DEFAULT_INNER_LLM_RETRY,
    private readonly logger?: Logger,
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
    const signal = options.abortSignal;
    const budget = new RetryBudget(this.retry);
    const log = this.logger?.child({ runId: this.target.runId, call_index: body.caller.call_index });
    /** Sends the call again after a transport failure, until it connects or the budget is spent. */
    const reopen = async (failure: TransportFailure): Promise<AsyncGenerator<{ data: string }>> => {
      for (;;) {
        if (!(await budget.wait(signal))) {
          log?.warn({ attempts: budget.attempts + 1, err: failure.message }, 'inner LLM call: giving up after transport failures');
          throw failure;
        }
        log?.warn({ attempt: budget.attempts + 1, err: failure.message }, 'inner LLM call: transport failure, sending the same call again');
        try {
          return await this.open(body, signal);
        } catch (err) {
          if (!(err instanceof TransportFailure) || signal?.aborted) throw err;
          failure = err;
        }
      }
    };
    let frames: AsyncGenerator<{ data: string }>;
    try {
      frames = await this.open(body, signal);
    } catch (err) {
      if (!(err instanceof TransportFailure) || signal?.aborted) throw err;
      frames = await reopen(err);
    }
    return { stream: toPartStream(frames, reopen, budget, signal), request: { body } };
  }

  /** One attempt: POST the call, return its SSE frames. Throws TransportFailure when worth retrying. */
  private async open(body: InvokeRequest, signal: AbortSignal | undefined): Promise<AsyncGenerator<{ data: string }>> {
    const url = `${this.apiUrl}/inner/api/agent/llm/invoke`;
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-inner-api-key': this.innerApiKey },
        body: JSON.stringify(body),
        signal,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new TransportFailure('InvokeConnectionError', `inner LLM endpoint unreachable: ${(err as Error).message}`);
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
      // The gateway's own 429 (the tenant's credits are used up) is not a provider's rate limit: its code
      // travels as the failure's reason, so the client learns it is a quota (provider_quota_exceeded).
      const errorType =
        code && (/^Invoke[A-Za-z]*Error$/.test(code) || code === QUOTA_EXCEEDED)
          ? code
          : (STATUS_ERROR_TYPES[res.status] ?? (res.status >= 500 ? 'InvokeServerUnavailableError' : 'InvokeError'));
      // 5xx before any chunk: the gateway (or a proxy in front of it) could not serve the call right now,
      // e.g. it is restarting or its database is away; nothing was streamed or billed, so send it again.
      const Err = res.status >= 500 ? TransportFailure : ModelCallError;
      throw new Err(errorType, `inner LLM invoke failed (${res.status}${code ? ` ${code}` : ''}): ${message}`, res.status);
    }
    return parseSse(res.body);
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
 *
 * A stream that breaks (read error, or an end before the final chunk) is re-opened through `reopen`
 * (the same call again); the new attempt's text and reasoning are matched against what was already
 * emitted, character by character, and only what lies beyond is emitted.
 */
function toPartStream(
  first: AsyncGenerator<{ data: string }>,
  reopen: (failure: TransportFailure) => Promise<AsyncGenerator<{ data: string }>>,
  budget: RetryBudget,
  signal: AbortSignal | undefined,
): ReadableStream<LanguageModelV3StreamPart> {
  let frames = first;
  let textOpen = false;
  let reasoningOpen = false;
  /** Everything emitted so far, across attempts. */
  const emitted = { text: '', reasoning: '' };
  /** What the current attempt has streamed (a replay starts again from the beginning). */
  let seen = { text: '', reasoning: '' };
  let calls: Array<{ id: string; name: string; args: string }> = [];
  let usage: Partial<Usage> | undefined;
  let finishRaw: string | undefined;
  /** The current attempt delivered its final chunk (finish_reason). */
  let complete = false;

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
  /** The part of `piece` not emitted yet (by position); a replay that differs from what was sent fails. */
  const fresh = (kind: 'text' | 'reasoning', piece: string): string => {
    const start = seen[kind].length;
    seen[kind] += piece;
    const done = emitted[kind];
    if (start < done.length) {
      const overlap = Math.min(piece.length, done.length - start);
      if (piece.slice(0, overlap) !== done.slice(start, start + overlap)) {
        throw new ModelCallError(
          'InvokeConnectionError',
          'the inner LLM call was retried after a transport failure and the replay differs from what was already streamed',
        );
      }
      if (overlap === piece.length) return '';
      piece = piece.slice(overlap);
    }
    emitted[kind] += piece;
    budget.progress();
    return piece;
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
      throw new ModelCallError(d.error_type || 'InvokeError', redactSecrets(d.message || chunk.message));
    }
    const { message, usage: u, finish_reason } = (chunk.data as ChunkData).delta;
    if (message.reasoning_content) {
      const r = fresh('reasoning', message.reasoning_content);
      if (r) {
        if (!reasoningOpen) push(ctrl, { type: 'reasoning-start', id: 'reasoning-0' });
        reasoningOpen = true;
        push(ctrl, { type: 'reasoning-delta', id: 'reasoning-0', delta: r });
      }
    }
    if (message.content) {
      const t = fresh('text', message.content);
      if (t) {
        if (!textOpen) push(ctrl, { type: 'text-start', id: 'text-0' });
        textOpen = true;
        push(ctrl, { type: 'text-delta', id: 'text-0', delta: t });
      }
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
    if (finish_reason) {
      finishRaw = finish_reason;
      complete = true;
    }
  };

  /** The stream broke: send the call again; the replay starts from the beginning. */
  const retry = async (failure: TransportFailure) => {
    void frames.return(undefined).catch(() => undefined);
    frames = await reopen(failure);
    seen = { text: '', reasoning: '' };
    calls = [];
    usage = undefined;
    finishRaw = undefined;
    complete = false;
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
          let next: IteratorResult<{ data: string }>;
          try {
            next = await frames.next();
          } catch (err) {
            if (signal?.aborted) throw err;
            await retry(
              new TransportFailure('InvokeConnectionError', `the inner LLM stream broke: ${String((err as Error)?.message ?? err)}`),
            );
            continue;
          }
          if (next.done) {
            if (complete) return finish(ctrl);
            await retry(new TransportFailure('InvokeConnectionError', 'the inner LLM stream ended before its final chunk'));
            continue;
          }
          handleFrame(ctrl, next.value.data);
        }
      } catch (err) {
        if (signal?.aborted) {
          ctrl.error(signal.reason ?? err);
          return;
        }
        closeOpen(ctrl);
        push(ctrl, {
          type: 'error',
          error:
            err instanceof ModelCallError
              ? err
              : new ModelCallError('InvokeConnectionError', redactSecrets(String((err as Error)?.message ?? err))),
        });
        ctrl.close();
        void frames.return(undefined).catch(() => undefined);
      }
    },
    async cancel() {
      await frames.return(undefined);
    },
  });
}
