/**
 * The builtin tool shelf (issue 41, docs/tools.md "Built-in tools"): every tool an agent config can pick in `tools.core`,
 * with what the model reads and the zod schema of its arguments. One contract for both processes: the agent backend's
 * core_tools layer offers and runs them (agent-backend/modules/tools.ts, agent-backend/modules/builtins/), the console
 * lists them (GET /console/api/builtin-tools), which the studio reads.
 */
import { z } from 'zod';
import { FRAMING_HEADERS } from '../platform/net/framing-headers.js';
import { BUILTIN_TOOL_NAMES, type BuiltinToolName } from './tool-names.js';

// ---- current_time ----------------------------------------------------------------------------

export const CurrentTimeArgs = z
  .object({ timezone: z.string().max(100).optional().describe('IANA time zone, e.g. Europe/Berlin or America/New_York; default UTC') })
  .strict();
export type CurrentTimeArgs = z.infer<typeof CurrentTimeArgs>;

// ---- http_request ----------------------------------------------------------------------------

export const HTTP_REQUEST_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** The request body the model may send (characters of `body`, or of `json` serialized). */
export const HTTP_REQUEST_MAX_BODY_CHARS = 65_536;
const MAX_HEADERS = 32;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

export const HttpRequestArgs = z
  .object({
    url: z.string().min(1).max(4096).describe('The http(s) URL to request. Only public internet addresses are reachable.'),
    method: z.enum(HTTP_REQUEST_METHODS).optional().describe('HTTP method; default GET'),
    headers: z.record(z.string(), z.string().max(8192)).optional().describe('Request headers, e.g. {"Accept": "application/json"}'),
    body: z.string().max(HTTP_REQUEST_MAX_BODY_CHARS).optional().describe('Request body as text (not for GET/HEAD)'),
    json: z.unknown().optional().describe('A JSON value sent as the body with Content-Type: application/json (instead of body)'),
    timeout_ms: z.number().int().positive().max(600_000).optional().describe('Give up after this many ms (the deployment caps it)'),
  })
  .strict()
  .superRefine((a, ctx) => {
    const method = a.method ?? 'GET';
    if (a.body !== undefined && a.json !== undefined)
      ctx.addIssue({ code: 'custom', path: ['json'], message: 'send either body or json, not both' });
    if ((method === 'GET' || method === 'HEAD') && (a.body !== undefined || a.json !== undefined))
      ctx.addIssue({ code: 'custom', path: ['body'], message: `a ${method} request has no body` });
    if (a.json !== undefined && (JSON.stringify(a.json)?.length ?? 0) > HTTP_REQUEST_MAX_BODY_CHARS)
      ctx.addIssue({ code: 'custom', path: ['json'], message: `the body is longer than ${HTTP_REQUEST_MAX_BODY_CHARS} characters` });
    const names = Object.keys(a.headers ?? {});
    if (names.length > MAX_HEADERS) ctx.addIssue({ code: 'custom', path: ['headers'], message: `at most ${MAX_HEADERS} headers` });
    for (const [n, v] of Object.entries(a.headers ?? {})) {
      if (!HEADER_NAME.test(n))
        ctx.addIssue({ code: 'custom', path: ['headers', n], message: "a header name is 1–128 letters, digits and !#$%&'*+.^_`|~-" });
      else if (/[\r\n\0]/.test(v))
        ctx.addIssue({ code: 'custom', path: ['headers', n], message: 'a header value may not contain CR, LF or NUL' });
    }
    for (const n of names)
      if (FRAMING_HEADERS.has(n.toLowerCase()))
        ctx.addIssue({ code: 'custom', path: ['headers', n], message: `the header ${n} is set by the connection, not by the request` });
  });
export type HttpRequestArgs = z.infer<typeof HttpRequestArgs>;

// ---- json_query ------------------------------------------------------------------------------

/** The JSON text the model may pass as `data` (or `data` serialized). */
export const JSON_QUERY_MAX_DATA_CHARS = 1_000_000;

export const JsonQueryArgs = z
  .object({
    data: z.unknown().describe('The JSON to query: an object or array, or a string holding JSON text (e.g. an http_request body)'),
    query: z
      .string()
      .min(1)
      .max(1000)
      .describe('The expression, e.g. JMESPath people[?age > `30`].name or JSONPath $.people[?@.age > 30].name'),
    syntax: z.enum(['jmespath', 'jsonpath']).optional().describe('jmespath (default) or jsonpath (RFC 9535)'),
  })
  .strict()
  .superRefine((a, ctx) => {
    if (a.data === undefined) ctx.addIssue({ code: 'custom', path: ['data'], message: 'data is required' });
  });
export type JsonQueryArgs = z.infer<typeof JsonQueryArgs>;

// ---- text ------------------------------------------------------------------------------------

export const TEXT_OPERATIONS = [
  'count',
  'replace',
  'regex_find',
  'split',
  'upper',
  'lower',
  'title',
  'trim',
  'truncate',
  'base64_encode',
  'base64_decode',
  'url_encode',
  'url_decode',
  'hash',
] as const;
export type TextOperation = (typeof TEXT_OPERATIONS)[number];
export const TEXT_MAX_CHARS = 1_000_000;

// One flat object (not a union): model APIs want an object schema at the top of a tool's parameters.
export const TextArgs = z
  .object({
    operation: z
      .enum(TEXT_OPERATIONS)
      .describe(
        'count (characters, words, lines, bytes); replace (find → replacement, or pattern with regex); regex_find (pattern); ' +
          'split (separator); upper; lower; title; trim; truncate (max_chars); base64_encode; base64_decode; url_encode; url_decode; hash (algorithm)',
      ),
    text: z.string().max(TEXT_MAX_CHARS).describe('The input text'),
    find: z.string().min(1).max(10_000).optional().describe('replace: the exact text to find'),
    pattern: z
      .string()
      .min(1)
      .max(1000)
      .optional()
      .describe('replace/regex_find: an RE2 regular expression (no backreferences or lookaround)'),
    flags: z
      .string()
      .regex(/^[ims]*$/, 'flags are i (ignore case), m (multi-line ^ $), s (. matches newline)')
      .optional()
      .describe('Regex flags: i, m, s'),
    replacement: z.string().max(10_000).optional().describe('replace: the new text ($1, $2 … name groups of a pattern)'),
    separator: z.string().max(1000).optional().describe('split: the separator (default a newline)'),
    max_chars: z.number().int().min(0).max(TEXT_MAX_CHARS).optional().describe('truncate: keep at most this many characters'),
    algorithm: z.enum(['sha256', 'sha1', 'sha512', 'md5']).optional().describe('hash: default sha256'),
  })
  .strict()
  .superRefine((a, ctx) => {
    const need = (field: keyof typeof a, why: string) => {
      if (a[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `${a.operation} needs ${field} (${why})` });
    };
    if (a.operation === 'replace') {
      if ((a.find === undefined) === (a.pattern === undefined))
        ctx.addIssue({ code: 'custom', path: ['find'], message: 'replace needs either find (exact text) or pattern (a regex), not both' });
      need('replacement', 'the new text; "" to delete');
    }
    if (a.operation === 'regex_find') need('pattern', 'the regular expression');
    if (a.operation === 'truncate') need('max_chars', 'how many characters to keep');
  });
export type TextArgs = z.infer<typeof TextArgs>;

// ---- code ------------------------------------------------------------------------------------

/** The program the model may send (characters); with shell quoting it stays well under one argument's 128 KiB. */
export const CODE_MAX_CHARS = 20_000;

export const CodeArgs = z
  .object({
    code: z
      .string()
      .min(1)
      .max(CODE_MAX_CHARS)
      .describe('A Python 3 program, run with python3 -c in the workspace directory; print() what you want to read'),
    timeout_ms: z.number().int().positive().optional().describe("Time limit in ms (at most the shell's limit)"),
  })
  .strict();
export type CodeArgs = z.infer<typeof CodeArgs>;

// ---- calculator, scratchpad and the shelf ----------------------------------------------------

export const CalculatorArgs = z
  .object({ expression: z.string().describe('Arithmetic expression, e.g. (2 + 3) * 4 ^ 2 / sqrt(16)') })
  .strict();
export const ScratchpadSetArgs = z
  .object({ key: z.string().min(1).max(100).describe('Note name'), value: z.string().max(10_000).describe('Text to remember') })
  .strict();
export const ScratchpadGetArgs = z.object({ key: z.string().min(1).max(100).describe('Note name') }).strict();

export interface BuiltinToolInfo {
  label: string;
  /** What the model reads. */
  description: string;
  args: z.ZodType;
  category: 'time' | 'math' | 'memory' | 'network' | 'data' | 'text' | 'code';
  /** It reaches the network (through the SSRF guard). */
  network?: true;
  /** It runs in the agent's sandbox: only with the runtime and shell on (else every call is refused). */
  sandbox?: true;
}

export const BUILTIN_TOOLS: Record<BuiltinToolName, BuiltinToolInfo> = {
  current_time: {
    label: 'Current time',
    category: 'time',
    description: 'Current date and time in a time zone: UTC and local ISO 8601, the UTC offset, the weekday and a readable line.',
    args: CurrentTimeArgs,
  },
  calculator: {
    label: 'Calculator',
    category: 'math',
    description: 'Evaluate an arithmetic expression exactly as written and return the number.',
    args: CalculatorArgs,
  },
  scratchpad_set: {
    label: 'Scratchpad: save',
    category: 'memory',
    description: 'Remember a short note under a key for later turns of this conversation.',
    args: ScratchpadSetArgs,
  },
  scratchpad_get: {
    label: 'Scratchpad: read',
    category: 'memory',
    description: 'Read a note saved earlier with scratchpad_set.',
    args: ScratchpadGetArgs,
  },
  http_request: {
    label: 'HTTP request',
    category: 'network',
    network: true,
    description:
      'Make an HTTP request to a public URL and read the answer: status, headers and the body as text (cut at the deployment’s size limit). ' +
      'Private, loopback and cloud metadata addresses are refused. GET/HEAD redirects are followed.',
    args: HttpRequestArgs,
  },
  json_query: {
    label: 'JSON query',
    category: 'data',
    description:
      'Select and reshape JSON with a JMESPath expression (default) or an RFC 9535 JSONPath query, e.g. on the body of an http_request.',
    args: JsonQueryArgs,
  },
  text: {
    label: 'Text utilities',
    category: 'text',
    description:
      'Exact text operations: count characters/words/lines/bytes, replace, find with a regular expression (RE2), split, ' +
      'upper/lower/title case, trim, truncate, base64 and URL encoding and decoding, sha256/sha1/sha512/md5 hashes.',
    args: TextArgs,
  },
  code: {
    label: 'Code (Python)',
    category: 'code',
    sandbox: true,
    description:
      "Run a Python 3 program in your workspace (the shell's sandbox: no network, the shell's time and output limits) " +
      'and read its exit_code, stdout and stderr. Files it writes stay in the workspace; new files in outputs/ are attached ' +
      'to your answer. Only when the agent has its runtime and shell on.',
    args: CodeArgs,
  },
};

/** The JSON schema a tool's arguments are offered with (the input side: optional fields stay optional). */
const schemas = new Map<BuiltinToolName, Record<string, unknown>>();
export function builtinParameters(name: BuiltinToolName): Record<string, unknown> {
  let s = schemas.get(name);
  if (!s) {
    s = z.toJSONSchema(BUILTIN_TOOLS[name].args, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    delete s.$schema;
    schemas.set(name, s);
  }
  return s;
}

/** The shelf as the console lists it. */
export function builtinToolList() {
  return BUILTIN_TOOL_NAMES.map((name) => {
    const t = BUILTIN_TOOLS[name];
    return {
      name,
      label: t.label,
      description: t.description,
      category: t.category,
      network: t.network ?? false,
      sandbox: t.sandbox ?? false,
      parameters: builtinParameters(name),
    };
  });
}
