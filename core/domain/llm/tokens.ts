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

/**
 * The longest run of whitespace or of non-whitespace the encoder is given whole. Its byte-pair merge is slow on a
 * long pre-tokenized word (quadratic, and ~9 µs a character even at 16: a repeated letter), and a word can be the
 * whole text — 100,000 letters with no space, a run of punctuation or of spaces: encoded whole, one such query held
 * the event loop for minutes (the fuzzer found it). Text made of shorter runs is encoded whole, so prose counts
 * exactly; a longer run (a hash, base64, an attack) is estimated from its first LONG_RUN characters, scaled to its
 * length: these counts are estimates anyway (see above).
 */
const LONG_RUN = 32;

/** Tokens of a text (the encoder is built on first use: parsing its ranks takes a moment). */
export function countTokens(text: string): number {
  if (!text) return 0;
  const enc = (encoder ??= new Tiktoken(o200kBase));
  let n = 0;
  let from = 0; // start of the text not yet counted
  let run = 0; // start of the current run
  for (let k = 1; k <= text.length; k++) {
    if (k < text.length && isWhitespace(text.charCodeAt(k)) === isWhitespace(text.charCodeAt(run))) continue;
    if (k - run > LONG_RUN) {
      if (run > from) n += enc.encode(text.slice(from, run)).length;
      let cut = run + LONG_RUN;
      if (isHighSurrogate(text.charCodeAt(cut - 1))) cut--; // never split a surrogate pair
      const sample = enc.encode(text.slice(run, cut)).length;
      n += Math.ceil((sample * (k - run)) / (cut - run));
      from = k;
    }
    run = k;
  }
  if (from < text.length) n += enc.encode(text.slice(from)).length;
  return n;
}

function isWhitespace(code: number): boolean {
  return code === 32 || (code >= 9 && code <= 13) || code === 0xa0 || code === 0x2028 || code === 0x2029 || code === 0x3000;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
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
