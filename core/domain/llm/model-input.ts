/**
 * What one model request was sent, as parts people read (issue 42, the inspector's context view after Letta ADE's):
 * the system prompt, the history before this turn's user message, the user's own text, the knowledge block the
 * agent backend appended to it (core/protocol/context-block.ts), the assistant's tool calls and the tool results of
 * this turn, and the tool definitions offered — each with its token count (the api's tokenizer, core/domain/llm/tokens.ts).
 * Texts are capped at PART_TEXT_CHARS for storage (the count is of the whole text), never inside a surrogate pair; an
 * image is a note, never its bytes.
 */
import { z } from 'zod';
import type { PromptMessage, ToolDefinition } from '../../protocol/inner-llm.js';
import { storableText } from '../../platform/storable-text.js';
import { countTokens } from './tokens.js';

export const PART_TEXT_CHARS = 4000;
/** The most history messages kept one by one; the older ones are one part that says how many. */
const HISTORY_PARTS = 60;
const KNOWLEDGE_OPEN = '<knowledge_context>';

export const ModelInputPart = z.object({
  kind: z.enum(['system', 'history', 'user', 'knowledge', 'assistant', 'tool_result', 'tools']),
  role: z.enum(['system', 'user', 'assistant', 'tool']).nullable(),
  /** The tool of a tool result. */
  name: z.string().nullable(),
  text: z.string(),
  tokens: z.number().int().nonnegative(),
  /** The whole text's length (more than text's when it was capped). */
  chars: z.number().int().nonnegative(),
});
export type ModelInputPart = z.infer<typeof ModelInputPart>;

function part(kind: ModelInputPart['kind'], role: ModelInputPart['role'], text: string, name: string | null = null): ModelInputPart {
  // The cap never splits a surrogate pair, and NUL or a lone surrogate (tool output may carry them), which PostgreSQL's
  // jsonb refuses, become U+FFFD (core/platform/storable-text.ts): the record of a request is never lost to its text.
  const end = isHighSurrogate(text.charCodeAt(PART_TEXT_CHARS - 1)) ? PART_TEXT_CHARS - 1 : PART_TEXT_CHARS;
  const stored = storableText(text.slice(0, end));
  return { kind, role, name, text: stored, tokens: countTokens(text), chars: text.length };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function messageText(m: PromptMessage): string {
  switch (m.role) {
    case 'user':
      return typeof m.content === 'string' ? m.content : m.content.map((p) => (p.type === 'text' ? p.data : '[image]')).join('\n');
    case 'assistant':
      return [m.content, ...(m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`)].filter(Boolean).join('\n');
    default:
      return m.content;
  }
}

/** The parts of a request's prompt and tools, in the order the model reads them. */
export function modelInputParts(messages: PromptMessage[], tools: ToolDefinition[] = []): ModelInputPart[] {
  const out: ModelInputPart[] = [];
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  const history: ModelInputPart[] = [];
  messages.forEach((m, i) => {
    if (m.role === 'system') out.push(part('system', 'system', m.content));
    else if (i < lastUser) history.push(part('history', m.role, messageText(m), m.role === 'tool' ? (m.name ?? null) : null));
    else if (i === lastUser && m.role === 'user') {
      flushHistory(out, history);
      const texts = typeof m.content === 'string' ? [m.content] : m.content.map((p) => (p.type === 'text' ? p.data : '[image]'));
      // The knowledge block is appended to the user's text (its own part, or joined into one string on the way).
      const own: string[] = [];
      const blocks: string[] = [];
      for (const t of texts) {
        const at = t.indexOf(KNOWLEDGE_OPEN);
        if (at < 0) own.push(t);
        else {
          if (at > 0) own.push(t.slice(0, at).trimEnd());
          blocks.push(t.slice(at));
        }
      }
      if (own.length) out.push(part('user', 'user', own.join('\n')));
      for (const b of blocks) out.push(part('knowledge', 'user', b));
    } else if (m.role === 'tool') out.push(part('tool_result', 'tool', m.content, m.name ?? null));
    else out.push(part('assistant', m.role, messageText(m)));
  });
  flushHistory(out, history);
  if (tools.length)
    out.push(
      part('tools', null, JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })))),
    );
  return out;
}

function flushHistory(out: ModelInputPart[], history: ModelInputPart[]): void {
  if (!history.length) return;
  const older = history.splice(0, Math.max(0, history.length - HISTORY_PARTS));
  if (older.length)
    out.push({
      kind: 'history',
      role: null,
      name: null,
      text: `(${older.length} earlier messages)`,
      tokens: older.reduce((n, p) => n + p.tokens, 0),
      chars: older.reduce((n, p) => n + p.chars, 0),
    });
  out.push(...history.splice(0));
}
