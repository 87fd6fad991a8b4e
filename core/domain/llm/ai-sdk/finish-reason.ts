/** Finish-reason mapping: the AI SDK's unified reason as the inner protocol's (Dify's) finish_reason. */
import type { LanguageModelV3FinishReason } from '@ai-sdk/provider';
import type { FinishReason } from '../provider.js';

export function toFinishReason(reason: LanguageModelV3FinishReason | string | undefined, hadToolCalls: boolean): FinishReason {
  const unified = typeof reason === 'string' ? reason : reason?.unified;
  switch (unified) {
    case 'length':
      return 'length';
    case 'content-filter':
      return 'content_filter';
    case 'tool-calls':
      return 'tool_calls';
    case 'stop':
      // Some providers (Gemini, Ollama) say `stop` after a tool call.
      return hadToolCalls ? 'tool_calls' : 'stop';
    default:
      return hadToolCalls ? 'tool_calls' : 'stop';
  }
}
