/**
 * Prompt mention expansion (docs/seeds/000 expand_prompt_mentions): the slash-menu tokens `{{#kind.id#}}` /
 * `{{#kind.id.label#}}` and Dify's `[§kind:id[:label]§]` markers become readable text before the prompt
 * reaches the model. Unresolved mentions fall back to their label, then their id; malformed leftovers
 * are removed.
 *
 * Linear time (issue 17 M1): prompts are written by console users and by agents (through the stub), and
 * they are expanded in the shared worker process, so no backtracking regex may see them. Each of the four
 * passes is a hand-written scanner that reads a character at most a bounded number of times; the output
 * is exactly what the former regexes produced (test/security/m1-mentions.test.ts compares both):
 *   SLASH  /\{\{#\s*([A-Za-z_][\w-]*)\.([^.#}]+)(?:\.([^#}]*))?\s*#\}\}/g
 *   MARKER /\[§([A-Za-z_][\w-]*):([^:§\]]+)(?::([^§\]]*))?§\]/g
 *   then leftovers /\{\{#[^}]*#\}\}/g and /\[§[^\]]*§\]/g are removed.
 */
export type MentionResolver = (kind: string, id: string) => string | undefined;

export function expandPromptMentions(text: string, resolve: MentionResolver = () => undefined): string {
  const sub = (kind: string, id: string, label?: string) => resolve(kind, id.trim()) ?? (label?.trim() || id.trim());
  let out = replaceAll(text, '{{#', (s, from) => matchSlash(s, from), sub);
  out = replaceAll(out, '[§', (s, from) => matchMarker(s, from), sub);
  out = removeLeftovers(out, '{{#', '}', '#');
  return removeLeftovers(out, '[§', ']', '§');
}

interface Match {
  end: number;
  kind: string;
  id: string;
  label?: string;
}

/** Replaces every non-overlapping match, left to right, like String#replace with a global regex. */
function replaceAll(
  text: string,
  open: string,
  match: (s: string, from: number) => Match | null,
  sub: (kind: string, id: string, label?: string) => string,
): string {
  let out = '';
  let copied = 0;
  let at = text.indexOf(open);
  while (at !== -1) {
    const m = match(text, at);
    if (m) {
      out += text.slice(copied, at) + sub(m.kind, m.id, m.label);
      copied = m.end;
      at = text.indexOf(open, m.end);
    } else at = text.indexOf(open, at + 1);
  }
  return copied === 0 ? text : out + text.slice(copied);
}

const isWordOrDash = (c: string) => /[\w-]/.test(c);
const isKindStart = (c: string) => /[A-Za-z_]/.test(c);

/** `[A-Za-z_][\w-]*` from `i`: the index after it, or -1. */
function scanKind(s: string, i: number): number {
  if (i >= s.length || !isKindStart(s[i]!)) return -1;
  i++;
  while (i < s.length && isWordOrDash(s[i]!)) i++;
  return i;
}

/** Index of the first character at or after `i` that is one of `stops` (s.length when none). */
function scanUntil(s: string, i: number, stops: string): number {
  while (i < s.length && !stops.includes(s[i]!)) i++;
  return i;
}

/**
 * `{{#` `\s*` kind `.` id(`[^.#}]+`) [`.` label(`[^#}]*`)] `\s*` `#}}` at `at`. The id and the label stop at
 * the first `#` or `}`, so a scan never passes the `#` of the next `{{#`: linear over all starts.
 */
function matchSlash(s: string, at: number): Match | null {
  let i = at + 3;
  while (i < s.length && /\s/.test(s[i]!)) i++;
  const kindEnd = scanKind(s, i);
  if (kindEnd === -1 || s[kindEnd] !== '.') return null;
  const idEnd = scanUntil(s, kindEnd + 1, '.#}');
  if (idEnd === kindEnd + 1) return null;
  let label: string | undefined;
  let close = idEnd;
  if (s[idEnd] === '.') {
    close = scanUntil(s, idEnd + 1, '#}');
    label = s.slice(idEnd + 1, close);
  }
  if (!s.startsWith('#}}', close)) return null;
  return { end: close + 3, kind: s.slice(i, kindEnd), id: s.slice(kindEnd + 1, idEnd), label };
}

/** `[§` kind `:` id(`[^:§\]]+`) [`:` label(`[^§\]]*`)] `§]` at `at`; scans stop at the next `§` or `]`. */
function matchMarker(s: string, at: number): Match | null {
  const kindEnd = scanKind(s, at + 2);
  if (kindEnd === -1 || s[kindEnd] !== ':') return null;
  const idEnd = scanUntil(s, kindEnd + 1, ':§]');
  if (idEnd === kindEnd + 1) return null;
  let label: string | undefined;
  let close = idEnd;
  if (s[idEnd] === ':') {
    close = scanUntil(s, idEnd + 1, '§]');
    label = s.slice(idEnd + 1, close);
  }
  if (!s.startsWith('§]', close)) return null;
  return { end: close + 2, kind: s.slice(at + 2, kindEnd), id: s.slice(kindEnd + 1, idEnd), label };
}

/**
 * Removes `open` + (no `closeChar`)* + `lastChar` + `closeChar`[+`closeChar` for `{{#`]. The body cannot
 * hold `closeChar`, so a candidate ends at the first `closeChar` after its opening; that position is
 * shared by every opening before it and is looked up once per run of openings (linear).
 */
function removeLeftovers(text: string, open: string, closeChar: string, lastChar: string): string {
  const tail = open === '{{#' ? lastChar + closeChar + closeChar : lastChar + closeChar;
  let out = '';
  let copied = 0;
  let nextClose = -2;
  let at = text.indexOf(open);
  while (at !== -1) {
    const bodyStart = at + open.length;
    if (nextClose !== -1 && nextClose < bodyStart) nextClose = text.indexOf(closeChar, bodyStart);
    if (nextClose === -1) break;
    const tailAt = nextClose - 1;
    if (tailAt >= bodyStart && text.startsWith(tail, tailAt)) {
      out += text.slice(copied, at);
      copied = tailAt + tail.length;
      at = text.indexOf(open, copied);
    } else at = text.indexOf(open, at + 1);
  }
  return copied === 0 ? text : out + text.slice(copied);
}
