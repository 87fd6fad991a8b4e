/**
 * Message history: the state holds the conversation as inner-LLM PromptMessages, so a run started
 * with the previous run's session snapshot continues the conversation.
 */
import { z } from 'zod';
import { countPromptTokens, countTokens } from '../../core/domain/llm/tokens.js';
import { PromptMessage } from '../../core/protocol/inner-llm.js';
import { defineModule } from './types.js';

const HistoryConfig = z
  .object({
    max_messages: z.number().int().positive().max(10_000).optional(),
    /**
     * The history a run without a session snapshot starts from (ignored with one): the api sends the conversation's
     * stored messages when a lost workspace's binding is replaced (activities/prepare/lost-history.ts), so the model
     * keeps its memory.
     */
    initial_messages: z.array(PromptMessage).max(10_000).optional(),
  })
  .strict();
export const HistoryState = z.object({ messages: z.array(PromptMessage).default([]) }).strict();
type HistoryState = z.infer<typeof HistoryState>;

/** Keeps the last `max` messages without starting on orphaned tool results. */
export function trimHistory(messages: PromptMessage[], max: number | undefined): PromptMessage[] {
  if (!max || messages.length <= max) return messages;
  let start = messages.length - max;
  while (start < messages.length && messages[start].role === 'tool') start++;
  return messages.slice(start);
}

export const history = defineModule<z.infer<typeof HistoryConfig>, HistoryState>({
  name: 'history',
  capability: 'history',
  description: 'Conversation message history carried in the session snapshot.',
  configSchema: HistoryConfig,
  stateSchema: HistoryState,
  initialState: (config) => ({ messages: config.initial_messages ?? [] }),
  create: ({ name, config, state }) => {
    const instance = {
      name,
      type: 'history',
      state: state as unknown,
      capability: {
        kind: 'history' as const,
        messages: () => trimHistory((instance.state as HistoryState).messages, config.max_messages),
        save: (messages: PromptMessage[]) => {
          instance.state = { messages: trimHistory(messages, config.max_messages) } satisfies HistoryState;
        },
      },
    };
    return instance;
  },
});

/**
 * Share of the window a prompt may fill by our count: the tokenizer is o200k_base (core/domain/llm/tokens.ts), and other
 * models' tokenizers count the same text up to ~10-15% higher, so a prompt is fitted into 85% of what is left.
 */
export const TOKENIZER_MARGIN = 0.85;
/** What is reserved for the answer when neither max_tokens nor the model's max output is known. */
export const DEFAULT_OUTPUT_RESERVE = 4_096;

export interface FitLimits {
  /** The model's context window, tokens. */
  contextWindow: number;
  /** model_settings.max_tokens: what the call may generate. */
  maxTokens?: number;
  /** The catalogue's max output for the model (reserved, capped at a quarter of the window, when max_tokens is unset). */
  maxOutput?: number;
  /** Tokens of what the call sends beside the messages (tool definitions). */
  extraTokens?: number;
}

export interface FitResult {
  messages: PromptMessage[];
  /** What was left out (oldest first); zero when everything fit. */
  dropped_messages: number;
  dropped_turns: number;
  /** Our count of the prompt as sent, and the budget it was fitted into. */
  prompt_tokens: number;
  budget_tokens: number;
}

/** Tokens kept free for the answer: max_tokens, else the model's max output up to a quarter of the window. */
export function outputReserve(l: FitLimits): number {
  if (l.maxTokens) return l.maxTokens;
  return Math.min(l.maxOutput ?? DEFAULT_OUTPUT_RESERVE, Math.floor(l.contextWindow / 4));
}

/**
 * Fits one model call's prompt into the model's context window (docs/ARCHITECTURE "History"): the system prompt
 * and the newest turns stay whole, the oldest turns go first — a turn is a user message and everything after it
 * up to the next one (assistant answers, tool calls and their results), so no tool result is sent without its
 * call. The newest turn is always sent, even alone over the budget (the provider then says
 * context_window_exceeded: one message too large for the model, not a long conversation).
 */
export function fitToContextWindow(system: string | null, messages: PromptMessage[], limits: FitLimits): FitResult {
  const budget = Math.max(0, Math.floor((limits.contextWindow - outputReserve(limits)) * TOKENIZER_MARGIN) - (limits.extraTokens ?? 0));
  const head: PromptMessage[] = system ? [{ role: 'system', content: system }] : [];
  const total = countPromptTokens([...head, ...messages]);
  if (total <= budget) return { messages, dropped_messages: 0, dropped_turns: 0, prompt_tokens: total, budget_tokens: budget };
  // Turn starts: indexes of user messages; messages before the first one belong to no turn and go first.
  const starts = messages.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  if (starts.length === 0 || starts[0] !== 0) starts.unshift(0);
  // Newest first, add turns while they fit (each turn's cost summed per message, framing included).
  const perMessage = messages.map((m) => countPromptTokens([m]) - countPromptTokens([]));
  let used = countPromptTokens(head);
  let keepFrom = messages.length;
  for (let t = starts.length - 1; t >= 0; t--) {
    const from = starts[t]!;
    const cost = perMessage.slice(from, keepFrom).reduce((a, b) => a + b, 0);
    if (keepFrom < messages.length && used + cost > budget) break;
    used += cost;
    keepFrom = from;
  }
  const kept = messages.slice(keepFrom);
  return {
    messages: kept,
    dropped_messages: keepFrom,
    dropped_turns: messages.slice(0, keepFrom).filter((m) => m.role === 'user').length,
    prompt_tokens: countPromptTokens([...head, ...kept]),
    budget_tokens: budget,
  };
}

/** Tokens of the tool definitions a call sends (name, description, JSON schema). */
export function toolDefinitionTokens(tools: { name: string; description: string; parameters: unknown }[]): number {
  return tools.reduce((n, t) => n + countTokens(t.name) + countTokens(t.description) + countTokens(JSON.stringify(t.parameters)), 0);
}
