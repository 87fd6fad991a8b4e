/**
 * A tool provider's secrets in every form they travel (issue 28): a server that echoes its request shows them
 * URL-encoded (a query parameter: encodeURIComponent, or form-encoded with `+` for spaces as URLSearchParams writes
 * it), base64 (standard or url-safe, padded or not, also inside a longer base64 text such as a Basic credential), JSON
 * escaped, and a header value's token alone (`Bearer <token>`, `token <token>`, `Basic <base64 of user:pass>` and the
 * `user:pass` / password inside it). scrubSecrets replaces each form, longest first, with `****`.
 */

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

/** Every form of one secret value. */
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
  add(JSON.stringify(secret).slice(1, -1));
  const b64 = Buffer.from(secret, 'utf8').toString('base64');
  add(b64);
  add(b64.replace(/=+$/, ''));
  add(toUrlSafe(b64));
  for (const core of base64Cores(secret)) add(core);
  return [...out];
}

/** The forms of every secret and of the token parts of header values, longest first. */
export function secretForms(values: (string | undefined)[]): string[] {
  const all = new Set<string>();
  for (const v of values) {
    if (!v) continue;
    for (const part of [v, ...headerTokenParts(v)]) for (const f of formsOf(part)) all.add(f);
  }
  return [...all].sort((a, b) => b.length - a.length);
}

/** The text with every form replaced by `****`. */
export function scrubSecrets(text: string, forms: string[]): string {
  let out = text;
  for (const f of forms) if (out.includes(f)) out = out.split(f).join(MASK);
  return out;
}
