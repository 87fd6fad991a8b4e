/**
 * The retrieved passages as the model reads them: a text part appended to the user message (seed 004: knowledge
 * eager results stay in the user role), each passage under a source label. The demo model parses it back for `/kb`.
 */
import type { RetrievedChunk } from './knowledge.js';

const OPEN = '<knowledge_context>';
const CLOSE = '</knowledge_context>';
// Cited by number (issue 42 problem 6): the answer says "[1]" and the citations under it name the source; a whole label
// in the answer was a raw "[dataset … · chunk … · score …]" tail.
const INTRO =
  'Passages from the knowledge base for this message (use them when they help; cite a passage by its number in brackets, like [1]):';

export function sourceLabel(c: Pick<RetrievedChunk, 'dataset_name' | 'document_name' | 'chunk_id' | 'score'>): string {
  return `dataset "${c.dataset_name}" · document "${c.document_name}" · chunk ${c.chunk_id} · score ${c.score.toFixed(2)}`;
}

/** The block for these chunks, or null when there are none (nothing is added to the message then). */
export function formatKnowledgeBlock(chunks: RetrievedChunk[]): string | null {
  if (chunks.length === 0) return null;
  // A passage cannot close the block early (a document containing the closing tag).
  const passages = chunks.map((c, i) => `[${i + 1}] ${sourceLabel(c)}\n${c.content.split(CLOSE).join('</ knowledge_context>')}`);
  return `${OPEN}\n${INTRO}\n\n${passages.join('\n\n')}\n${CLOSE}`;
}

/** Splits a user message's text into what the user wrote and the passages of a knowledge block (if any). */
export function parseKnowledgeBlock(text: string): {
  query: string;
  passages: { n: number; label: string; content: string }[] | null;
} {
  const start = text.indexOf(OPEN);
  if (start < 0) return { query: text, passages: null };
  const end = text.indexOf(CLOSE, start);
  const inner = text.slice(start + OPEN.length, end < 0 ? undefined : end);
  const passages = inner
    .split(/\n\n(?=\[\d+\] )/)
    .map((p) => /^\s*\[(\d+)\] ([^\n]*)\n([\s\S]*)$/.exec(p))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ n: Number(m[1]), label: m[2]!, content: m[3]!.trim() }));
  const rest = (text.slice(0, start) + (end < 0 ? '' : text.slice(end + CLOSE.length))).trim();
  return { query: rest, passages };
}
