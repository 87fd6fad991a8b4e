/**
 * The `text` builtin (issue 41): the string work models get wrong by hand — counting, exact replacement, regular
 * expressions, splitting, case, trimming and cutting, base64, URL encoding and hashes. Regular expressions are RE2's
 * (re2js: linear time, no backreferences or lookaround), so no pattern can stall the agent backend the way a
 * backtracking engine can (`(a+)+$`). Each result is capped like any tool's answer.
 */
import crypto from 'node:crypto';
import { RE2JS } from 're2js';
import type { TextArgs } from '../../../core/protocol/builtin-tools.js';
import type { BuiltinOutcome } from './outcome.js';

const MAX_MATCHES = 1000;

export interface TextDeps {
  /** TOOL_MAX_RESPONSE_BYTES: a result larger than this is refused, not cut (a cut text would look complete). */
  maxResultBytes: number;
}

function compile(pattern: string, flags = ''): RE2JS {
  let f = 0;
  if (flags.includes('i')) f |= RE2JS.CASE_INSENSITIVE;
  if (flags.includes('m')) f |= RE2JS.MULTILINE;
  if (flags.includes('s')) f |= RE2JS.DOTALL;
  return RE2JS.compile(pattern, f);
}

const words = (t: string) => (t.match(/\S+/g) ?? []).length;

function run(a: TextArgs): unknown {
  const t = a.text;
  switch (a.operation) {
    case 'count':
      return {
        characters: [...t].length,
        utf16_units: t.length,
        words: words(t),
        lines: t === '' ? 0 : t.split(/\r\n|\r|\n/).length,
        bytes: Buffer.byteLength(t),
      };
    case 'replace': {
      if (a.find !== undefined) {
        const parts = t.split(a.find);
        return { text: parts.join(a.replacement!), replacements: parts.length - 1 };
      }
      const re = compile(a.pattern!, a.flags);
      let count = 0;
      const m = re.matcher(t);
      while (m.find()) count++;
      return { text: re.matcher(t).replaceAll(a.replacement!), replacements: count };
    }
    case 'regex_find': {
      const re = compile(a.pattern!, a.flags);
      const m = re.matcher(t);
      const matches: { match: string; index: number; groups: (string | null)[] }[] = [];
      let more = false;
      while (m.find()) {
        if (matches.length === MAX_MATCHES) {
          more = true;
          break;
        }
        const groups: (string | null)[] = [];
        for (let g = 1; g <= m.groupCount(); g++) groups.push(m.group(g));
        matches.push({ match: m.group(0) ?? '', index: m.start(), groups });
      }
      return { count: matches.length, matches, ...(more ? { note: `only the first ${MAX_MATCHES} matches are listed` } : {}) };
    }
    case 'split': {
      const parts = t.split(a.separator ?? '\n');
      return { count: parts.length, parts };
    }
    case 'upper':
      return { text: t.toUpperCase() };
    case 'lower':
      return { text: t.toLowerCase() };
    case 'title':
      return { text: t.toLowerCase().replace(/(^|[\s\-_/([{"'])(\p{L})/gu, (_m, pre: string, c: string) => pre + c.toUpperCase()) };
    case 'trim':
      return { text: t.trim() };
    case 'truncate': {
      const chars = [...t];
      return { text: chars.slice(0, a.max_chars).join(''), truncated: chars.length > a.max_chars! };
    }
    case 'base64_encode':
      return { text: Buffer.from(t, 'utf8').toString('base64') };
    case 'base64_decode': {
      const clean = t.replace(/\s+/g, '');
      if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw new TextError('the text is not base64');
      const bytes = Buffer.from(clean.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
      const decoded = new TextDecoder('utf-8', { fatal: true });
      try {
        return { text: decoded.decode(bytes) };
      } catch {
        throw new TextError(`the decoded ${bytes.length} bytes are not UTF-8 text`);
      }
    }
    case 'url_encode':
      return { text: encodeURIComponent(t) };
    case 'url_decode':
      try {
        return { text: decodeURIComponent(t.replace(/\+/g, ' ')) };
      } catch {
        throw new TextError('the text is not valid percent-encoding');
      }
    case 'hash': {
      const algorithm = a.algorithm ?? 'sha256';
      return { algorithm, hex: crypto.createHash(algorithm).update(t, 'utf8').digest('hex') };
    }
  }
}

class TextError extends Error {}

export function textTool(deps: TextDeps, args: TextArgs): BuiltinOutcome {
  let result: unknown;
  try {
    result = run(args);
  } catch (err) {
    if (err instanceof TextError) return { isError: true, result: `${args.operation}: ${err.message}` };
    // re2js: a pattern it cannot compile (syntax, or a Perl feature RE2 leaves out such as \1 or (?=…)).
    if ((err as Error)?.name === 'RE2JSSyntaxException')
      return {
        isError: true,
        result: `${args.operation}: invalid pattern: ${(err as Error).message} (RE2 syntax: no backreferences or lookaround)`,
      };
    throw err;
  }
  const size = Buffer.byteLength(JSON.stringify(result));
  if (size > deps.maxResultBytes)
    return {
      isError: true,
      result: `the result is ${size} bytes, more than the ${deps.maxResultBytes} a tool may return: work on a smaller part of the text`,
    };
  return { isError: false, result };
}
