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
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
  LanguageModelV3StreamResult,
} from '@ai-sdk/provider';
import type { InvokeRequest, ToolDefinition } from '../../core/protocol/inner-llm.js';
import type { ExecutionContextLayerConfig, Usage } from '../../core/protocol/run.js';
import { parseSse } from '../../core/platform/sse.js';
import type { Logger } from '../../core/platform/logger.js';
import { ModelCallError } from '../errors.js';
import { fromV3Prompt } from './prompt.js';
import { assistantMetadataOf, emptyV3Usage, toPartStream } from './part-stream.js';
import { DEFAULT_INNER_LLM_RETRY, RetryBudget, TransportFailure, type InnerLlmRetryOptions } from './retry.js';
import { recordBackendModelRequest } from '../../core/platform/metrics/index.js';
import { inSpan, withTraceHeaders } from '../../core/platform/tracing/index.js';

export { DEFAULT_INNER_LLM_RETRY, type InnerLlmRetryOptions };

/** Who is calling: copied from the run's execution context layer (the api checks them against the forwarded context). */
export interface ModelCallerIdentity {
  tenant_id: string;
  user_id: string;
  user_from: 'end-user' | 'account';
  app_id: string;
  agent_id?: string;
  invoke_from: string;
  agent_mode?: string;
}

export interface ModelTarget {
  runId: string;
  provider: string;
  model: string;
  caller: ModelCallerIdentity;
  /** The run's signed execution context layer config, forwarded with every call: the api's only source of scope. */
  executionContext?: ExecutionContextLayerConfig;
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
    // Reasoning settings (the agent loop passes them as dify provider options; the gateway maps them per provider).
    const dify = options.providerOptions?.dify as { thinking_budget?: unknown; reasoning_effort?: unknown } | undefined;
    if (typeof dify?.thinking_budget === 'number') params.thinking_budget = dify.thinking_budget;
    if (typeof dify?.reasoning_effort === 'string') params.reasoning_effort = dify.reasoning_effort;
    const tools: ToolDefinition[] = (options.tools ?? [])
      .filter((t) => t.type === 'function')
      .map((t) => ({
        name: t.name,
        description: (t as { description?: string }).description ?? '',
        parameters: (t as { inputSchema: unknown }).inputSchema as Record<string, unknown>,
      }));
    const { tenant_id, user_id, user_from, app_id, agent_id, invoke_from, agent_mode } = this.target.caller;
    return {
      ...(this.target.executionContext ? { execution_context: this.target.executionContext } : {}),
      caller: {
        invocation_id: this.target.runId,
        agent_run_id: this.target.runId,
        call_index: callIndexOf(options),
        tenant_id,
        user_id,
        user_from,
        app_id,
        ...(agent_id ? { agent_id } : {}),
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
    const started = performance.now();
    try {
      // A span of its own (tracing on): the api's inner LLM route continues the trace from its traceparent.
      res = await inSpan('agent_backend.model_request', { 'llm.provider': this.target.provider, 'llm.model': this.target.model }, () =>
        this.fetchImpl(url, {
          method: 'POST',
          headers: withTraceHeaders({
            'content-type': 'application/json',
            accept: 'text/event-stream',
            'x-inner-api-key': this.innerApiKey,
          }),
          body: JSON.stringify(body),
          signal,
        }),
      );
      recordBackendModelRequest(res.ok ? 'ok' : 'error', (performance.now() - started) / 1000);
    } catch (err) {
      recordBackendModelRequest('error', (performance.now() - started) / 1000);
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
    const { reasoning_parts, content_provider_metadata } = assistantMetadataOf(finish?.providerMetadata);
    if (text)
      content.unshift({ type: 'text', text, ...(content_provider_metadata ? { providerMetadata: content_provider_metadata } : {}) });
    if (reasoning_parts?.length)
      content.unshift(
        ...reasoning_parts.map((r) => ({
          type: 'reasoning' as const,
          text: r.text,
          ...(r.provider_metadata ? { providerMetadata: r.provider_metadata } : {}),
        })),
      );
    else if (reasoning) content.unshift({ type: 'reasoning', text: reasoning });
    return {
      content,
      finishReason: finish?.finishReason ?? { unified: 'other', raw: undefined },
      usage: finish?.usage ?? emptyV3Usage(),
      providerMetadata: finish?.providerMetadata,
      warnings: [],
    };
  }
}
