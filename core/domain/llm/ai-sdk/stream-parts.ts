/**
 * Stream-part mapping: a LanguageModelV3 stream as the gateway's ProviderEvents. Text and reasoning deltas
 * pass through as they come; a tool call's streamed argument fragments (`tool-input-*`) are accumulated and
 * the call is sent whole once complete (the inner protocol carries complete calls, never fragments); the
 * `finish` part gives the finish reason and the usage with cached-prompt and reasoning tokens. An `error` part
 * is thrown (mapped by provider-errors.ts).
 */
import type { LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import type { ToolCall } from '../../../protocol/inner-llm.js';
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

export async function* toProviderEvents(stream: ReadableStream<LanguageModelV3StreamPart>): AsyncGenerator<ProviderEvent> {
  /** Streamed argument text per tool call id (used when the final tool-call part carries none). */
  const inputs = new Map<string, { name: string; text: string }>();
  const sent = new Set<string>();
  let toolCalls = 0;
  let finished = false;
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value: part } = await reader.read();
      if (done) break;
      switch (part.type) {
        case 'text-delta':
          if (part.delta) yield { type: 'delta', content: part.delta };
          break;
        case 'reasoning-delta':
          if (part.delta) yield { type: 'delta', reasoning_content: part.delta };
          break;
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
          const call: ToolCall = { id: part.toolCallId, type: 'function', function: { name: part.toolName, arguments: args || '{}' } };
          toolCalls += 1;
          yield { type: 'delta', tool_calls: [call] };
          break;
        }
        case 'error':
          throw part.error;
        case 'finish':
          finished = true;
          yield { type: 'finish', finish_reason: toFinishReason(part.finishReason, toolCalls > 0), usage: toUsage(part.usage) };
          break;
        default:
          break; // stream-start, response-metadata, text/reasoning start/end, tool-input-end, sources, raw
      }
    }
  } finally {
    reader.releaseLock();
  }
  if (!finished) throw new InvokeError('InvokeConnectionError', 'the provider stream ended before the response was complete');
}
