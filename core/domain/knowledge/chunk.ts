/**
 * Chunking with overlap (docs/knowledge.md): windows of at most CHUNK_MAX_CHARS characters, cut at the last
 * paragraph break in the window's second half, else a line or sentence end, else a space; the next window starts
 * CHUNK_OVERLAP_CHARS before the cut (moved to a word start), so a fact split by a cut is whole in one of the two.
 */
export const CHUNK_MAX_CHARS = 1000;
export const CHUNK_OVERLAP_CHARS = 150;

/** Where a window is cut, best first: the last of the first one found in its second half. */
export const CHUNK_SEPARATORS = ['\n\n', '\n', '. ', '! ', '? ', '; ', ' '];

export interface ChunkOptions {
  maxChars?: number;
  overlapChars?: number;
  /**
   * A dataset's own segment separators (Dify's segment identifier, e.g. `\n---\n` or `###`): the text is cut at
   * every one of them first — no chunk spans one — and each piece is then windowed as above, cut at them first.
   */
  separators?: string[];
}

/** Whitespace tidied: CRLF → LF, trailing spaces dropped, at most one blank line in a row. */
export function normaliseText(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[ \t\f\v]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

export function chunkText(raw: string, opts: ChunkOptions = {}): string[] {
  const own = (opts.separators ?? []).filter((x) => x.length > 0);
  if (own.length) {
    let pieces = [normaliseText(raw)];
    for (const sep of own) pieces = pieces.flatMap((p) => p.split(sep));
    return pieces.flatMap((p) => windows(p, opts, [...own, ...CHUNK_SEPARATORS]));
  }
  return windows(raw, opts, CHUNK_SEPARATORS);
}

function windows(raw: string, opts: ChunkOptions, separators: string[]): string[] {
  const max = opts.maxChars ?? CHUNK_MAX_CHARS;
  const overlap = Math.min(opts.overlapChars ?? CHUNK_OVERLAP_CHARS, Math.floor(max / 2));
  const text = normaliseText(raw);
  const chunks: string[] = [];
  let start = 0;
  while (start < text.length) {
    const end = start + max >= text.length ? text.length : cutPoint(text, start, start + max, separators);
    const piece = text.slice(start, end).trim();
    if (piece) chunks.push(piece);
    if (end >= text.length) break;
    start = Math.max(start + 1, wordStart(text, end - overlap));
  }
  return chunks;
}

/** Where to end the window [start, limit): the best break in its second half, else the limit itself. */
function cutPoint(text: string, start: number, limit: number, separators: string[]): number {
  const floor = start + Math.floor((limit - start) / 2);
  const window = text.slice(floor, limit);
  for (const sep of separators) {
    const at = window.lastIndexOf(sep);
    if (at >= 0) return floor + at + sep.length;
  }
  return limit;
}

/** The start of the word at or after `i` (an overlap never begins mid-word). */
function wordStart(text: string, i: number): number {
  if (i <= 0) return 0;
  if (/\s/.test(text[i - 1]!)) return i;
  const next = text.slice(i).search(/\s/);
  return next < 0 ? i : i + next + 1;
}
