/**
 * The inner LLM endpoint's SSE chunks as AI SDK V3 stream parts, with the replay deduplication of a call that
 * was re-sent after a transport failure (see inner-llm-model.ts).
 */
import type { LanguageModelV3FinishReason, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { redactSecrets } from '../../core/domain/llm/redact.js';
import { InvokeChunk, type ChunkData, type ProviderMetadata, type ReasoningPart } from '../../core/protocol/inner-llm.js';
import type { Usage } from '../../core/protocol/run.js';
import { ModelCallError } from '../errors.js';
import { TransportFailure, type RetryBudget } from './retry.js';

export function emptyV3Usage(): LanguageModelV3Usage {
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
 * What the finish part's `providerMetadata.dify` carries besides usage: the answer's reasoning blocks with their
 * provider metadata and the text's metadata (docs/models.md "Provider metadata that must round-trip"), from the attempt
 * that finished. The agent loop keeps them in history so the next request sends them back.
 */
export interface DifyAssistantMetadata {
  reasoning_parts?: ReasoningPart[];
  content_provider_metadata?: ProviderMetadata;
}

/** The assistant metadata of a finish (or finish-step) part's providerMetadata. */
export function assistantMetadataOf(meta: unknown): DifyAssistantMetadata {
  const d = (meta as { dify?: DifyAssistantMetadata } | undefined)?.dify;
  return {
    ...(Array.isArray(d?.reasoning_parts) ? { reasoning_parts: d.reasoning_parts } : {}),
    ...(d?.content_provider_metadata && typeof d.content_provider_metadata === 'object'
      ? { content_provider_metadata: d.content_provider_metadata }
      : {}),
  };
}

/** A tool call's provider metadata (`providerMetadata.dify.provider_metadata` of its `tool-call` part). */
export function toolCallMetadataOf(meta: unknown): ProviderMetadata | undefined {
  const m = (meta as { dify?: { provider_metadata?: unknown } } | undefined)?.dify?.provider_metadata;
  return m && typeof m === 'object' ? (m as ProviderMetadata) : undefined;
}

/**
 * Maps inner-LLM chunks to V3 stream parts. Tool calls may arrive whole or in OpenAI-style fragments
 * (same or empty id continues the previous call); they are emitted complete at the end of the stream.
 *
 * A stream that breaks (read error, or an end before the final chunk) is re-opened through `reopen`
 * (the same call again); the new attempt's text and reasoning are matched against what was already
 * emitted, character by character, and only what lies beyond is emitted.
 */
export function toPartStream(
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
  let calls: Array<{ id: string; name: string; args: string; meta?: ProviderMetadata }> = [];
  let reasoningParts: ReasoningPart[] = [];
  let contentMeta: ProviderMetadata | undefined;
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
      push(ctrl, {
        type: 'tool-call',
        toolCallId: c.id,
        toolName: c.name,
        input,
        providerMetadata: { dify: { arguments: input, ...(c.meta ? { provider_metadata: c.meta } : {}) } },
      });
    }
    const p = usage?.prompt_tokens;
    const o = usage?.completion_tokens;
    const assistant: DifyAssistantMetadata = {
      ...(reasoningParts.length ? { reasoning_parts: reasoningParts } : {}),
      ...(contentMeta ? { content_provider_metadata: contentMeta } : {}),
    };
    const dify = { ...(usage ? { usage } : {}), ...assistant };
    push(ctrl, {
      type: 'finish',
      finishReason: { unified: FINISH[finishRaw ?? ''] ?? (calls.length ? 'tool-calls' : 'stop'), raw: finishRaw },
      usage: {
        inputTokens: { total: p, noCache: p, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: o, text: o, reasoning: undefined },
      },
      ...(Object.keys(dify).length ? { providerMetadata: { dify: JSON.parse(JSON.stringify(dify)) } } : {}),
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
      const d = chunk.data as { error_type: string; message: string; code?: string; usage?: Partial<Usage> };
      throw new ModelCallError(d.error_type || 'InvokeError', redactSecrets(d.message || chunk.message), undefined, d.code, d.usage);
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
        if (tc.provider_metadata) last.meta = { ...last.meta, ...tc.provider_metadata };
      } else {
        calls.push({
          id: tc.id,
          name: tc.function.name,
          args: tc.function.arguments,
          ...(tc.provider_metadata ? { meta: tc.provider_metadata } : {}),
        });
      }
    }
    if (message.reasoning_parts?.length) reasoningParts.push(...message.reasoning_parts);
    if (message.content_provider_metadata) contentMeta = message.content_provider_metadata;
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
    reasoningParts = [];
    contentMeta = undefined;
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
