/**
 * The JSON edge guard (issue 17 M2/L3), shared by every JSON body the services accept (public /v1,
 * console, forms, inner API, agent backend runs and stub): a size limit, a nesting-depth limit checked on
 * the raw bytes BEFORE JSON.parse (one linear pass, no recursion, so a body nested millions deep costs a
 * scan and a 400, not a stack overflow later in zod, JSON.stringify or Prisma), and optionally a refusal
 * of NUL characters and of lone UTF-16 surrogates anywhere in keys or strings (PostgreSQL text and jsonb cannot
 * store either: 22P05 / "unsupported Unicode escape sequence" would become a 500; issue 17 L3, issue 28). Both are
 * refused, not normalised: replacing them would silently change what the client sent (a key, a form answer), and a
 * well-formed client never sends them. Every refusal is a 400 whose message names the field.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';

/** Default nesting limit of a JSON body (objects + arrays); JSON_MAX_DEPTH in core/platform/config.ts. */
export const DEFAULT_JSON_MAX_DEPTH = 64;

export class JsonGuardError extends Error {
  readonly status = 400;
  readonly expose = true;
  constructor(
    readonly type: 'entity.too.deep' | 'entity.nul' | 'entity.surrogate',
    readonly field: string,
    message: string,
  ) {
    // A key can be as long as the body: the answer names at most 200 characters of its path.
    super(`${field.length > 200 ? `${field.slice(0, 200)}…` : field}: ${message}`);
  }
}

const OPEN_OBJ = 0x7b;
const OPEN_ARR = 0x5b;
const CLOSE_OBJ = 0x7d;
const CLOSE_ARR = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Throws JsonGuardError when `raw` (JSON text) nests deeper than `maxDepth`. Strings are skipped with their
 * escapes, so brackets inside strings do not count. The field named is the top-level key under which the
 * limit was crossed (`body` for a top-level array or scalar).
 */
export function assertJsonDepth(raw: Uint8Array, maxDepth: number): void {
  let depth = 0;
  let topKeyStart = -1;
  let topKeyEnd = -1;
  let topIsObject = false;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i]!;
    if (b === QUOTE) {
      // Strings are most of a body's bytes: jump to the next quote with a native search (memchr for a Buffer) and
      // keep it only when an even number of backslashes precedes it (an odd one escapes it).
      const start = i + 1;
      let j = start;
      for (;;) {
        const q = raw.indexOf(QUOTE, j);
        if (q < 0) {
          j = raw.length;
          break;
        }
        let k = q - 1;
        while (k >= start && raw[k] === BACKSLASH) k--;
        if ((q - 1 - k) % 2 === 0) {
          j = q;
          break;
        }
        j = q + 1;
      }
      i = j;
      if (depth === 1 && topIsObject) {
        topKeyStart = start;
        topKeyEnd = i;
      }
    } else if (b === OPEN_OBJ || b === OPEN_ARR) {
      if (depth === 0) topIsObject = b === OPEN_OBJ;
      depth++;
      if (depth > maxDepth) {
        const field = depth > 1 && topIsObject && topKeyStart >= 0 ? decodeKey(raw.subarray(topKeyStart, topKeyEnd)) : 'body';
        throw new JsonGuardError('entity.too.deep', field, `nested deeper than ${maxDepth} levels`);
      }
    } else if (b === CLOSE_OBJ || b === CLOSE_ARR) depth--;
  }
}

function decodeKey(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.subarray(0, 200)).toString('utf8');
  try {
    return (JSON.parse(`"${text}"`) as string).replace(/\u0000/g, '\\u0000');
  } catch {
    return text;
  }
}

/** A string PostgreSQL cannot store: it holds NUL, or a lone UTF-16 surrogate (not well-formed). */
export type BadString = 'nul' | 'surrogate';

function badString(s: string): BadString | null {
  if (s.includes('\u0000')) return 'nul';
  // String.prototype.isWellFormed (Node 20+, ES2024; the lib here is ES2022): native, linear.
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed()) return 'surrogate';
  return null;
}

/** A key made printable for a message: NUL and lone surrogates as their JSON escapes. */
function printable(key: string): string {
  return key.replace(/\u0000/g, '\\u0000').replace(/[\ud800-\udfff]/g, (c, i: number, s: string) => {
    const code = c.charCodeAt(0);
    const paired = code < 0xdc00 ? /[\udc00-\udfff]/.test(s[i + 1] ?? '') : i > 0 && /[\ud800-\udbff]/.test(s[i - 1] ?? '');
    return paired ? c : `\\u${code.toString(16)}`;
  });
}

/**
 * The dotted path of the first key or string PostgreSQL cannot store (NUL or a lone surrogate) and why, or null.
 * Iterative (an explicit stack), so it never recurses, whatever the depth.
 */
export function findBadString(value: unknown, root = 'body'): { path: string; why: BadString } | null {
  const stack: [unknown, string][] = [[value, root]];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      const why = badString(v);
      if (why) return { path, why };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i]!;
        const p = path === root ? printable(k) : `${path}.${printable(k)}`;
        const why = badString(k);
        if (why) return { path: p, why };
        stack.push([child, p]);
      }
    }
  }
  return null;
}

export interface JsonBodyOptions {
  /** Largest body accepted, bytes or a size string ('1mb'); bigger bodies get 413 before parsing. */
  limit: number | string;
  maxDepth?: number;
  /** Refuse NUL and lone UTF-16 surrogates in any key or string (every edge whose data reaches PostgreSQL text/jsonb). */
  rejectNul?: boolean;
}

const NUL_ESCAPE = Buffer.from('\\u0000');

/**
 * Whether a JSON text may hold a NUL or a lone surrogate: both can only arrive as escapes (`\u0000`, `\uD800`..`\uDFFF`;
 * raw surrogate bytes are invalid UTF-8 and decode as U+FFFD). No such escape, nothing to walk.
 */
export function mayHoldBadString(buf: Uint8Array): boolean {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.includes(NUL_ESCAPE)) return true;
  for (let i = b.indexOf(0x5c); i >= 0 && i + 2 < b.length; i = b.indexOf(0x5c, i + 1)) {
    // \u followed by d or D: a surrogate escape (\uD800-\uDFFF) or a character just below (\uD000-\uD7FF); walk then.
    if (b[i + 1] === 0x75 && (b[i + 2] === 0x64 || b[i + 2] === 0x44)) return true;
    if (b[i + 1] === 0x5c) i++; // an escaped backslash: the next one starts nothing
  }
  return false;
}

/** express.json with the depth check on the raw bytes and (optionally) the NUL check after parsing. */
export function jsonBody(opts: JsonBodyOptions): RequestHandler[] {
  const maxDepth = opts.maxDepth ?? DEFAULT_JSON_MAX_DEPTH;
  const mayHoldNul = new WeakSet<Request>();
  const parse = express.json({
    limit: opts.limit,
    verify: (req, _res, buf) => {
      assertJsonDepth(buf, maxDepth);
      if (opts.rejectNul && mayHoldBadString(buf)) mayHoldNul.add(req as Request);
    },
  });
  const nul = (req: Request, _res: Response, next: NextFunction) => {
    if (!mayHoldNul.has(req)) return next();
    const bad = findBadString(req.body);
    if (bad?.why === 'nul') return next(new JsonGuardError('entity.nul', bad.path, 'must not contain NUL characters'));
    if (bad)
      return next(new JsonGuardError('entity.surrogate', bad.path, 'must not contain lone UTF-16 surrogates (not valid Unicode text)'));
    next();
  };
  return [parse, nul];
}
