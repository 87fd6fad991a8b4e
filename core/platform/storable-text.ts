/**
 * Text PostgreSQL can store, for what a run produces (issue 47): shell output, tool results, model text and thoughts
 * may hold U+0000 (NUL) or a lone UTF-16 surrogate (half of a pair, which JSON.stringify writes as `\ud800`).
 * PostgreSQL refuses both in `jsonb` ("unsupported Unicode escape sequence") and NUL in `text` (22021), and one such
 * character used to fail the whole turn. Where a run's records are stored (the agent backend's run event store, the
 * api's intake of backend events and its event log) each is replaced by U+FFFD, the Unicode replacement character: the
 * one character that says "something undecodable was here", what a UTF-8 decoder already puts in place of bad bytes, and
 * visible (an escape such as `\u0000` would be indistinguishable from a tool that printed those six characters). The
 * raw bytes stay where bytes matter: a file the model or a tool made in the workspace is copied byte for byte
 * (docs/security.md "Characters PostgreSQL cannot store").
 *
 * Requests are different: the JSON edge guard (core/platform/json-guard.ts) refuses these characters in what a client
 * sends, because replacing them would silently change a key or an answer.
 */

/** What every NUL and lone surrogate becomes. */
export const REPLACEMENT_CHARACTER = '\ufffd';

type WellFormed = { isWellFormed(): boolean; toWellFormed(): string };

/** `s` with NUL and lone surrogates replaced by U+FFFD (the same string when it holds none). */
export function storableText(s: string): string {
  // String.prototype.isWellFormed/toWellFormed (Node 20+, ES2024; the lib here is ES2022): native and linear; the
  // latter replaces exactly the lone surrogates with U+FFFD.
  const w = s as unknown as WellFormed;
  const wellFormed = w.isWellFormed();
  if (wellFormed && !s.includes('\u0000')) return s;
  return (wellFormed ? s : w.toWellFormed()).replaceAll('\u0000', REPLACEMENT_CHARACTER);
}

/**
 * In JSON text: an escaped backslash (kept, so the `\u` after it is no escape), an escaped surrogate pair (kept: valid),
 * the NUL escape and a lone surrogate's escape (replaced). Left to right, so the alternatives never overlap wrongly.
 */
const BAD_ESCAPE = /\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;

/**
 * JSON text (any: JSON.stringify's output or a peer's) with every NUL and lone surrogate escape replaced by U+FFFD's;
 * the same string when it holds none. Raw NUL cannot occur in valid JSON text (control characters must be escaped) and
 * a raw lone surrogate cannot arrive as UTF-8 (a decoder makes it U+FFFD), so escapes are the only carriers.
 */
export function storableJsonText(json: string): string {
  if (!json.includes('\\u')) return json;
  return json.replace(BAD_ESCAPE, (m) => (m.length === 2 || m.length === 12 ? m : '\\ufffd'));
}

/** JSON.stringify(value) as `jsonb` accepts it (see storableJsonText). */
export function storableJson(value: unknown): string {
  return storableJsonText(JSON.stringify(value) ?? 'null');
}
