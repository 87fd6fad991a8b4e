/**
 * Stream-part mapping: a LanguageModelV3 stream as the gateway's ProviderEvents. Text and reasoning deltas
 * pass through as they come; a tool call's streamed argument fragments (`tool-input-*`) are accumulated and
 * the call is sent whole once complete (the inner protocol carries complete calls, never fragments); the
 * `finish` part gives the finish reason and the usage with cached-prompt and reasoning tokens. An `error` part
 * is thrown (mapped by provider-errors.ts).
 *
 * Provider metadata that must go back on the next request (docs/models.md "Provider metadata that must round-trip")
 * is gathered per part: a reasoning block's (from its start, deltas and end: Anthropic's signature arrives as an empty
 * delta, a redacted block's data on its start, OpenAI's encrypted content on its end) is sent with the block whole
 * once it ends (`reasoning_parts`); the answer text's (Gemini's thoughtSignature) as `content_provider_metadata`; a
 * tool call's on the call.
 */
import type { LanguageModelV3StreamPart, LanguageModelV3Usage, SharedV3ProviderMetadata } from '@ai-sdk/provider';
import type { ProviderMetadata, ReasoningPart, ToolCall } from '../../../protocol/inner-llm.js';
import { InvokeError } from '../errors.js';
import type { ProviderEvent, ProviderUsage } from '../provider.js';
import { toFinishReason } from './finish-reason.js';

export function toUsage(u: LanguageModelV3Usage | undefined): ProviderUsage | null {
  const prompt = u?.inputTokens.total;
  const completion = u?.outputTokens.total;
  if (prompt === undefined && completion === undefined) return null;
  return {
    prompt_tokens: prompt ?? 0,
    completion_tokens: completion ?? 0,
    ...(u?.inputTokens.cacheRead ? { cached_prompt_tokens: u.inputTokens.cacheRead } : {}),
    ...(u?.outputTokens.reasoning ? { reasoning_tokens: u.outputTokens.reasoning } : {}),
  };
}

/** The `input` of a tool-call part as the JSON text of the inner protocol. */
function argumentsText(input: unknown): string {
  if (typeof input === 'string') return input.trim() ? input : '{}';
  return JSON.stringify(input ?? {});
}

/** `into` with `meta` merged in, per provider key (a later value wins); undefined when both are empty. */
export function mergeMetadata(
  into: ProviderMetadata | undefined,
  meta: SharedV3ProviderMetadata | undefined,
): ProviderMetadata | undefined {
  if (!meta || Object.keys(meta).length === 0) return into;
  const out: ProviderMetadata = { ...into };
  for (const [provider, values] of Object.entries(meta)) {
    if (values && typeof values === 'object') out[provider] = { ...out[provider], ...(values as ProviderMetadata[string]) };
  }
  return out;
}

export async function* toProviderEvents(stream: ReadableStream<LanguageModelV3StreamPart>): AsyncGenerator<ProviderEvent> {
  /** Streamed argument text per tool call id (used when the final tool-call part carries none). */
  const inputs = new Map<string, { name: string; text: string }>();
  const sent = new Set<string>();
  /** Reasoning blocks still open, by part id (in start order). */
  const reasoning = new Map<string, { text: string; meta: ProviderMetadata | undefined }>();
  let textMeta: ProviderMetadata | undefined;
  let toolCalls = 0;
  let finished = false;
  const reasoningOf = (id: string) => {
    let r = reasoning.get(id);
    if (!r) reasoning.set(id, (r = { text: '', meta: undefined }));
    return r;
  };
  const whole = (r: { text: string; meta: ProviderMetadata | undefined }): ReasoningPart =>
    r.meta ? { text: r.text, provider_metadata: r.meta } : { text: r.text };
  /** The text part's metadata changed: the new merged value, else null. */
  const noteText = (meta: SharedV3ProviderMetadata | undefined): ProviderMetadata | null => {
    const next = mergeMetadata(textMeta, meta);
    if (next === textMeta || JSON.stringify(next) === JSON.stringify(textMeta)) return null;
    textMeta = next;
    return next ?? null;
  };
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value: part } = await reader.read();
      if (done) break;
      switch (part.type) {
        case 'text-start':
        case 'text-end': {
          const meta = noteText(part.providerMetadata);
          if (meta) yield { type: 'delta', content_provider_metadata: meta };
          break;
        }
        case 'text-delta': {
          const meta = noteText(part.providerMetadata);
          if (part.delta || meta)
            yield { type: 'delta', ...(part.delta ? { content: part.delta } : {}), ...(meta ? { content_provider_metadata: meta } : {}) };
          break;
        }
        case 'reasoning-start': {
          const r = reasoningOf(part.id);
          r.meta = mergeMetadata(r.meta, part.providerMetadata);
          break;
        }
        case 'reasoning-delta': {
          const r = reasoningOf(part.id);
          r.text += part.delta;
          r.meta = mergeMetadata(r.meta, part.providerMetadata);
          if (part.delta) yield { type: 'delta', reasoning_content: part.delta };
          break;
        }
        case 'reasoning-end': {
          const r = reasoningOf(part.id);
          r.meta = mergeMetadata(r.meta, part.providerMetadata);
          reasoning.delete(part.id);
          yield { type: 'delta', reasoning_parts: [whole(r)] };
          break;
        }
        case 'tool-input-start':
          inputs.set(part.id, { name: part.toolName, text: '' });
          break;
        case 'tool-input-delta': {
          const acc = inputs.get(part.id);
          if (acc) acc.text += part.delta;
          break;
        }
        case 'tool-call': {
          if (part.providerExecuted || sent.has(part.toolCallId)) break;
          sent.add(part.toolCallId);
          const streamed = inputs.get(part.toolCallId);
          const args = part.input === undefined || part.input === '' ? (streamed?.text ?? '{}') : argumentsText(part.input);
          const meta = mergeMetadata(undefined, part.providerMetadata);
          const call: ToolCall = {
            id: part.toolCallId,
            type: 'function',
            function: { name: part.toolName, arguments: args || '{}' },
            ...(meta ? { provider_metadata: meta } : {}),
          };
          toolCalls += 1;
          yield { type: 'delta', tool_calls: [call] };
          break;
        }
        case 'error':
          throw part.error;
        case 'finish':
          // A block the provider never closed still goes back whole (its signature may have come already).
          if (reasoning.size) yield { type: 'delta', reasoning_parts: [...reasoning.values()].map(whole) };
          reasoning.clear();
          finished = true;
          yield { type: 'finish', finish_reason: toFinishReason(part.finishReason, toolCalls > 0), usage: toUsage(part.usage) };
          break;
        default:
          break; // stream-start, response-metadata, tool-input-end, sources, raw
      }
    }
  } finally {
    reader.releaseLock();
  }
  if (!finished)
    throw new InvokeError('InvokeConnectionError', 'the provider stream ended before the response was complete', {
      reason: 'provider_stream_interrupted',
    });
}
