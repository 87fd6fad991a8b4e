/**
 * A tool provider's secrets in every form they travel (issue 28, issue 47), each replaced by `****` in what a tool
 * answers. A server that echoes its request shows them:
 * - as whole-value encodings, matched as literal forms (`secretForms`, longest first): percent-encoded
 *   (encodeURIComponent in upper or lower case hex, RFC 3986's stricter set, every byte, encodeURI, or form-encoded
 *   with `+` for spaces as URLSearchParams writes it), hex of the UTF-8 bytes (either case), base64 (standard or
 *   url-safe, padded or not, also inside a longer base64 text such as a Basic credential);
 * - with some or all characters escaped one by one, in any mix, as JSON and HTML encoders write them: `\uXXXX` (either
 *   case; pairs for astral characters), `\/` and JSON's other escapes, HTML named entities (HTML5's whole table, through
 *   the `entities` package), decimal `&#NN;` and hex `&#xHH;`. Those are found by reading the text with its escapes
 *   decoded and masking the original span of every occurrence (`scrubSecrets` with the secrets' parts): Python's
 *   ensure_ascii, PHP's `\/`, Go's `\u003c`, Gson's `\u003d`, html.escape, htmlspecialchars' `&#039;`, OWASP's `&#x2F;`,
 *   escapeHtml4's `&eacute;` and an every-character encoding are all one rule;
 * - and a header value's token alone (`Bearer <token>`, `token <token>`, `Basic <base64 of user:pass>` and the
 *   `user:pass` / password inside it), each a secret part of its own.
 * Not covered: an encoding of an encoding (a JSON escape of an HTML entity), and other whole-value transforms.
 */
import { decodeHTMLStrict } from 'entities';

/** Shorter forms are not scrubbed: they would match ordinary text. */
const MIN_FORM = 4;
/** Base64 cores cut out of a longer text are this long at least (below, too many chance matches). */
const MIN_BASE64_CORE = 8;
const MASK = '****';

/** `Bearer x` / `token x` / `Basic b64` → the token part, and for Basic the decoded `user:pass` and the password. */
export function headerTokenParts(value: string): string[] {
  const m = /^\s*(bearer|token|basic|digest|apikey|api-key)\s+(\S.*?)\s*$/i.exec(value);
  if (!m) return [];
  const token = m[2]!;
  const out = [token];
  if (m[1]!.toLowerCase() === 'basic') {
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    // Only when the token really was base64 of text (re-encoding gives it back).
    if (decoded && Buffer.from(decoded, 'utf8').toString('base64').replace(/=+$/, '') === token.replace(/=+$/, '')) {
      out.push(decoded);
      const colon = decoded.indexOf(':');
      if (colon >= 0) out.push(decoded.slice(colon + 1));
    }
  }
  return out;
}

const toUrlSafe = (b64: string) => b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

/** The base64 characters that depend only on `s`, for each of the 3 alignments `s` may have inside longer bytes. */
function base64Cores(s: string): string[] {
  const bytes = Buffer.from(s, 'utf8');
  const out: string[] = [];
  for (let shift = 0; shift < 3; shift++) {
    const b64 = Buffer.concat([Buffer.alloc(shift), bytes])
      .toString('base64')
      .replace(/=+$/, '');
    const first = Math.ceil((8 * shift) / 6);
    const last = Math.floor((8 * (shift + bytes.length)) / 6); // exclusive
    const core = b64.slice(first, last);
    if (core.length >= MIN_BASE64_CORE) out.push(core, toUrlSafe(core));
  }
  return out;
}

/** Percent-encoding of the UTF-8 bytes of `s` that `encoded` picks (`%XX`, hex in the case asked). */
function percentEncoded(s: string, encoded: (byte: number) => boolean, upper: boolean): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const hex = b.toString(16).padStart(2, '0');
    out += encoded(b) ? `%${upper ? hex.toUpperCase() : hex}` : String.fromCharCode(b);
  }
  return out;
}
/** RFC 3986's unreserved characters: all a strict percent-encoder leaves as they are. */
const unreserved = (b: number) =>
  (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || '-._~'.includes(String.fromCharCode(b));

/** Every literal form of one secret value (its character-by-character escapes are `scrubSecrets`' decoding's). */
export function formsOf(secret: string): string[] {
  if (secret.length < MIN_FORM) return [];
  const out = new Set<string>();
  const add = (v: string) => {
    if (v.length >= MIN_FORM) out.add(v);
  };
  add(secret);
  const uri = encodeURIComponent(secret);
  add(uri);
  add(uri.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
  add(new URLSearchParams({ s: secret }).toString().slice(2));
  add(encodeURI(secret));
  for (const upper of [true, false]) {
    add(percentEncoded(secret, (b) => !unreserved(b), upper));
    add(percentEncoded(secret, () => true, upper));
  }
  add(JSON.stringify(secret).slice(1, -1));
  const hex = Buffer.from(secret, 'utf8').toString('hex');
  add(hex);
  add(hex.toUpperCase());
  const b64 = Buffer.from(secret, 'utf8').toString('base64');
  add(b64);
  add(b64.replace(/=+$/, ''));
  add(toUrlSafe(b64));
  for (const core of base64Cores(secret)) add(core);
  return [...out];
}

/** The secret values themselves and the token parts of header values (at least MIN_FORM long), longest first. */
export function secretParts(values: (string | undefined)[]): string[] {
  const all = new Set<string>();
  for (const v of values) {
    if (!v) continue;
    for (const part of [v, ...headerTokenParts(v)]) if (part.length >= MIN_FORM) all.add(part);
  }
  return [...all].sort((a, b) => b.length - a.length);
}

/** The literal forms of every secret part, longest first. */
export function secretForms(values: (string | undefined)[]): string[] {
  const all = new Set<string>();
  for (const part of secretParts(values)) for (const f of formsOf(part)) all.add(f);
  return [...all].sort((a, b) => b.length - a.length);
}

/** One escape of JSON (`\uXXXX`, `\/`, `\"`, …) or HTML (`&#NN;`, `&#xHH;`, `&name;`); anything else is itself. */
const ESCAPE = /\\u([0-9a-fA-F]{4})|\\([\\/"'bfnrt])|&#[xX]([0-9a-fA-F]{1,6});|&#([0-9]{1,7});|&[A-Za-z][A-Za-z0-9]{1,31};/g;
const JSON_SINGLE: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

function decodeEscape(m: RegExpExecArray): string | null {
  if (m[1] !== undefined) return String.fromCharCode(parseInt(m[1], 16));
  if (m[2] !== undefined) return JSON_SINGLE[m[2]] ?? m[2];
  const cp = m[3] !== undefined ? parseInt(m[3], 16) : m[4] !== undefined ? Number(m[4]) : null;
  if (cp !== null) return cp <= 0x10ffff ? String.fromCodePoint(cp) : null;
  const named = decodeHTMLStrict(m[0]);
  return named === m[0] ? null : named;
}

/**
 * The spans of `text` that, read with their JSON and HTML escapes decoded, are one of `parts`: each escape decodes to
 * its character(s) and every decoded UTF-16 unit remembers the span of text it came from.
 */
function escapedSpans(text: string, parts: string[]): [number, number][] {
  if (parts.length === 0 || (!text.includes('\\') && !text.includes('&'))) return [];
  let decoded = '';
  const from: number[] = [];
  const to: number[] = [];
  const literal = (a: number, b: number) => {
    for (let i = a; i < b; i++) {
      decoded += text[i];
      from.push(i);
      to.push(i + 1);
    }
  };
  let at = 0;
  let escapes = 0;
  for (const m of text.matchAll(ESCAPE)) {
    const value = decodeEscape(m);
    if (value === null) continue;
    literal(at, m.index);
    for (let k = 0; k < value.length; k++) {
      decoded += value[k];
      from.push(m.index);
      to.push(m.index + m[0].length);
    }
    at = m.index + m[0].length;
    escapes++;
  }
  if (escapes === 0) return [];
  literal(at, text.length);
  const spans: [number, number][] = [];
  for (const part of parts)
    for (let i = decoded.indexOf(part); i >= 0; i = decoded.indexOf(part, i + part.length))
      spans.push([from[i]!, to[i + part.length - 1]!]);
  return spans;
}

/**
 * The text with every secret masked as `****`: first each occurrence of a secret part written with JSON or HTML escapes
 * (any mix, decoded to find it), then every literal form, longest first.
 */
export function scrubSecrets(text: string, forms: string[], parts: string[] = []): string {
  let out = text;
  const spans = escapedSpans(out, parts).sort((a, b) => a[0] - b[0]);
  if (spans.length) {
    let masked = '';
    let at = 0;
    for (const [a, b] of spans) {
      if (b <= at) continue;
      masked += out.slice(at, Math.max(a, at)) + (a >= at ? MASK : '');
      at = b;
    }
    out = masked + out.slice(at);
  }
  for (const f of forms) if (out.includes(f)) out = out.split(f).join(MASK);
  return out;
}
