/**
 * Token counts estimated with a real tokenizer (js-tiktoken, o200k_base: GPT-4o's encoding, ranks bundled,
 * offline) where a model did not report its own: a call cut before its final usage chunk (a user's stop),
 * or a provider that reports none. Other models tokenize differently, so these counts are flagged
 * `estimated` wherever they are reported; they are close, not exact.
 */
import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import type { PromptMessage, ToolCall } from '../../protocol/inner-llm.js';
import { contentText } from './provider.js';

let encoder: Tiktoken | null = null;

/** Tokens of a text (the encoder is built on first use: parsing its ranks takes a moment). */
export function countTokens(text: string): number {
  if (!text) return 0;
  encoder ??= new Tiktoken(o200kBase);
  return encoder.encode(text).length;
}

/**
 * Builds the encoder soon, off the request path: a call cut by its caller is recorded with tokenizer counts, and the
 * first build takes seconds on a busy machine — long enough for a reaped run's terminal to read the ledger before
 * that row is in (issue 30: the turn's usage is its ledger rows). Unref'd: it never keeps a process alive.
 */
export function warmTokenizer(): void {
  if (encoder) return;
  setTimeout(() => void (encoder ??= new Tiktoken(o200kBase)), 0).unref();
}

/** OpenAI's chat framing: each message costs a few tokens beyond its content, and the reply is primed. */
const PER_MESSAGE = 3;
const REPLY_PRIMING = 3;

/** Prompt tokens of a chat request: contents, reasoning, tool calls and tool names, plus framing. */
export function countPromptTokens(messages: PromptMessage[]): number {
  let n = REPLY_PRIMING;
  for (const m of messages) {
    n += PER_MESSAGE + countTokens(contentText(m.content));
    if (m.role === 'assistant') {
      n += countTokens(m.reasoning_content ?? '');
      for (const c of m.tool_calls ?? []) n += countTokens(c.function.name) + countTokens(c.function.arguments);
    }
  }
  return n;
}

/** Token counts of a call estimated with the tokenizer: its prompt, and what the model generated. */
export function estimatedTokens(
  prompt: PromptMessage[],
  generated: string,
  toolCalls: ToolCall[] = [],
): { prompt_tokens: number; completion_tokens: number } {
  return {
    prompt_tokens: countPromptTokens(prompt),
    completion_tokens:
      countTokens(generated) + toolCalls.reduce((n, c) => n + countTokens(c.function.name) + countTokens(c.function.arguments), 0),
  };
}
