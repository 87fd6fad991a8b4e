/**
 * The model request behind Dify's "suggested questions after answer" (core/domain/suggested-questions.ts), and the
 * reading of its answer: pure, so the demo model (providers/demo.ts) can recognise the request and the parser can be
 * tested on its own. Like Dify: the last few exchanges of the thread, and an instruction asking for a JSON array of
 * three short questions in the language of the latest answer.
 */
import type { PromptMessage } from '../../protocol/inner-llm.js';

/** How many exchanges of the thread (the message's own included) the model reads, as Dify (3). */
export const SUGGESTION_HISTORY_MESSAGES = 3;
/** Characters kept of each query and answer: the request stays small whatever the conversation holds. */
const TEXT_LIMIT = 2_000;
/** At most this many questions are answered, each at most QUESTION_LIMIT characters. */
export const SUGGESTED_QUESTION_COUNT = 3;
const QUESTION_LIMIT = 200;

/** The instruction's first line: how the demo model knows this request (DEMO_MODEL.md). */
export const SUGGESTED_QUESTIONS_MARKER = 'Suggest the three questions the user is most likely to ask next.';

const INSTRUCTION = [
  SUGGESTED_QUESTIONS_MARKER,
  'Keep each question short (under 20 words) and write them in the language of the assistant’s latest answer.',
  'Reply with a JSON array of exactly three strings and nothing else, for example: ["first question", "second question", "third question"]',
].join('\n');

export interface Exchange {
  query: string;
  answer: string;
}

const clip = (text: string) => (text.length > TEXT_LIMIT ? `${text.slice(0, TEXT_LIMIT)}…` : text);

/** The prompt for the exchanges of a thread, oldest first (the last one is the answer the questions follow). */
export function suggestedQuestionsPrompt(exchanges: Exchange[]): PromptMessage[] {
  const transcript = exchanges
    .slice(-SUGGESTION_HISTORY_MESSAGES)
    .map((e) => `User: ${clip(e.query.trim())}\nAssistant: ${clip(e.answer.trim())}`)
    .join('\n\n');
  return [
    { role: 'system', content: INSTRUCTION },
    { role: 'user', content: `The conversation so far:\n\n${transcript}` },
  ];
}

/**
 * The questions in a model's answer: the first JSON array in it (a model may wrap it in prose or a code fence), its
 * non-empty strings, trimmed, without repeats, at most three. Anything unreadable gives none (Dify answers an empty
 * list then).
 */
export function parseSuggestedQuestions(text: string): string[] {
  const start = text.indexOf('[');
  const end = text.lastIndexOf(']');
  if (start < 0 || end <= start) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.slice(start, end + 1));
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const out: string[] = [];
  for (const q of parsed) {
    if (typeof q !== 'string') continue;
    const t = q.trim().slice(0, QUESTION_LIMIT);
    if (t && !out.includes(t)) out.push(t);
    if (out.length === SUGGESTED_QUESTION_COUNT) break;
  }
  return out;
}

/** Whether these prompt messages are the request above (the demo model's cue). */
export function isSuggestedQuestionsPrompt(messages: PromptMessage[]): boolean {
  return messages.some((m) => m.role === 'system' && m.content.startsWith(SUGGESTED_QUESTIONS_MARKER));
}

/**
 * The demo model's deterministic answer (DEMO_MODEL.md): three questions, the first naming the user's latest query of
 * the transcript (so each message gets its own), as the JSON array the instruction asks for.
 */
export function demoSuggestedQuestions(messages: PromptMessage[]): string {
  const transcript = messages.find((m) => m.role === 'user');
  const text = typeof transcript?.content === 'string' ? transcript.content : '';
  const queries = [...text.matchAll(/^User: (.*)$/gm)].map((m) => m[1]!.trim());
  const last = queries[queries.length - 1] ?? '';
  const topic = last.length > 40 ? `${last.slice(0, 40)}…` : last;
  return JSON.stringify([topic ? `Tell me more about: ${topic}` : 'Tell me more', 'Can you give an example?', 'What should I ask next?']);
}
