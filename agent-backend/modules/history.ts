/**
 * Message history: the state holds the conversation as inner-LLM PromptMessages, so a run started
 * with the previous run's session snapshot continues the conversation.
 */
import { z } from 'zod';
import { PromptMessage } from '../../core/protocol/inner-llm.js';
import { defineModule } from './types.js';

const HistoryConfig = z.object({ max_messages: z.number().int().positive().max(10_000).optional() }).strict();
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
  initialState: () => ({ messages: [] }),
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
