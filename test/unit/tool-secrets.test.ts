/**
 * Issue 28 item 4, the pure parts: a tool secret in every form it travels (core/domain/tools/secret-forms.ts), path
 * arguments that would leave the operation's path and header parameters that would reframe or reroute the request
 * (core/domain/tools/invoke.ts buildRequest, core/domain/tools/reserved-headers.ts), and the logger's header redaction.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { REDACT_PATHS } from '../../core/platform/logger.js';
import { buildRequest } from '../../core/domain/tools/invoke.js';
import type { ApiOperation } from '../../core/domain/tools/provider-tool.js';
import { hasUserinfo, headerParamProblem } from '../../core/domain/tools/reserved-headers.js';
import { headerTokenParts, scrubSecrets, secretForms, secretParts } from '../../core/domain/tools/secret-forms.js';

const SECRET = 'k3y with space+plus/slash=eq&amp~é';

/** Every way an echoing server or an error message may show the secret. */
function echoes(s: string): string[] {
  const b64 = Buffer.from(s).toString('base64');
  return [
    s,
    encodeURIComponent(s),
    encodeURIComponent(s).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
    new URLSearchParams({ k: s }).toString().slice(2),
    JSON.stringify(s).slice(1, -1),
    b64,
    b64.replace(/=+$/, ''),
    b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''),
    Buffer.from(s).toString('base64url'),
  ];
}

describe('secret forms', () => {
  it('scrubs the raw, URL-encoded, form-encoded, JSON-escaped and base64 forms', () => {
    const forms = secretForms([SECRET]);
    for (const e of echoes(SECRET)) {
      const out = scrubSecrets(`before ${e} after`, forms);
      expect(out, e).toBe('before **** after');
    }
  });

  it('scrubs the secret inside a longer base64 text, whatever its alignment', () => {
    const forms = secretForms([SECRET]);
    for (const prefix of ['', 'a', 'ab', 'abc', 'user:']) {
      const b64 = Buffer.from(`${prefix}${SECRET}tail`).toString('base64');
      const out = scrubSecrets(b64, forms);
      expect(out, prefix).toContain('****');
      // What is left is at most the few characters that mix the secret's bytes with its neighbours'.
      expect(out.replace('****', '').length).toBeLessThan(prefix.length * 2 + 12);
    }
  });

  it('scrubs the bare token of a Bearer / token header and the user:pass and password of a Basic one', () => {
    expect(headerTokenParts('Bearer abc.def-123')).toEqual(['abc.def-123']);
    expect(headerTokenParts('token ghp_0123456789')).toEqual(['ghp_0123456789']);
    const basic = `Basic ${Buffer.from('alice:s3cret-pass').toString('base64')}`;
    expect(headerTokenParts(basic)).toEqual([basic.slice(6), 'alice:s3cret-pass', 's3cret-pass']);
    const forms = secretForms(['Bearer mcp-token-0123456789', basic]);
    const text = `got mcp-token-0123456789 and ${encodeURIComponent('s3cret-pass')} and ${basic.slice(6)} and ${Buffer.from('s3cret-pass').toString('base64')}`;
    expect(scrubSecrets(text, forms)).toBe('got **** and **** and **** and ****');
  });

  it('leaves short and empty values alone', () => {
    expect(secretForms(['', undefined, 'ab'])).toEqual([]);
  });
});

/** A secret with what every encoder treats differently: `/`, `&`, `<>"'=`, a space, `+`, non-ASCII and an astral character. */
const HARD = 'p@ss/w0rd&<tag> "q" \'a\'=b+c é€\u{1F511}~!*()';
const u4 = (c: number, upper = false) => `\\u${c.toString(16).padStart(4, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`;
const units = (s: string, pick: (ch: string) => boolean, upper = false) =>
  [...s]
    .map((ch) =>
      pick(ch) ? [...Array(ch.length).keys()].map((i) => u4(ch.charCodeAt(i), upper)).join('') : JSON.stringify(ch).slice(1, -1),
    )
    .join('');
const ent = (s: string, pick: (ch: string) => boolean, form: (cp: number) => string) =>
  [...s].map((ch) => (pick(ch) ? form(ch.codePointAt(0)!) : ch)).join('');
const htmlEscape = (s: string, apos: string, extra: Record<string, string> = {}) =>
  [...s].map((ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": apos, ...extra })[ch] ?? ch).join('');
const pct = (s: string, keep: RegExp, upper: boolean) =>
  [...Buffer.from(s)]
    .map((b) =>
      keep.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`,
    )
    .join('');
const nonAscii = (ch: string) => ch.codePointAt(0)! > 0x7f;

/** How the encoders servers use write HARD (each written here from its documented rules, not from the module's code). */
const ENCODED: [string, string][] = [
  ['JSON.stringify', JSON.stringify(HARD).slice(1, -1)],
  ['JSON with \\/ (PHP JSON_UNESCAPED_UNICODE)', JSON.stringify(HARD).slice(1, -1).replace(/\//g, '\\/')],
  ['Python json.dumps (ensure_ascii: \\uXXXX for non-ASCII)', units(HARD, nonAscii)],
  ['PHP json_encode (\\/ and \\uXXXX)', units(HARD, nonAscii).replace(/\//g, '\\/')],
  ['Go encoding/json (\\u003c \\u003e \\u0026)', units(HARD, (ch) => '<>&'.includes(ch))],
  ["Gson (<>&=' as \\u)", units(HARD, (ch) => "<>&='".includes(ch))],
  ['every character as \\uXXXX, upper-case hex', units(HARD, () => true, true)],
  ['every character as \\uXXXX, lower-case hex', units(HARD, () => true)],
  ['HTML: Python html.escape (&#x27;)', htmlEscape(HARD, '&#x27;')],
  ['HTML: PHP htmlspecialchars ENT_QUOTES (&#039;)', htmlEscape(HARD, '&#039;')],
  ['HTML: OWASP (&#x27; and &#x2F;)', htmlEscape(HARD, '&#x27;', { '/': '&#x2F;' })],
  ['HTML: named entities for non-ASCII too (escapeHtml4: &eacute; &euro;)', htmlEscape(HARD, "'", { é: '&eacute;', '€': '&euro;' })],
  [
    'HTML: named entities everywhere (&sol; &commat; &equals; &plus; &excl; &ast; &lpar; &rpar;)',
    htmlEscape(HARD, '&apos;', {
      '/': '&sol;',
      '@': '&commat;',
      '=': '&equals;',
      '+': '&plus;',
      '!': '&excl;',
      '*': '&ast;',
      '(': '&lpar;',
      ')': '&rpar;',
      é: '&eacute;',
    }),
  ],
  [
    'HTML: every character decimal',
    ent(
      HARD,
      () => true,
      (cp) => `&#${cp};`,
    ),
  ],
  [
    'HTML: every character hex',
    ent(
      HARD,
      () => true,
      (cp) => `&#x${cp.toString(16)};`,
    ),
  ],
  [
    'HTML: every non-alphanumeric hex, upper case',
    ent(
      HARD,
      (ch) => !/[a-z0-9]/i.test(ch),
      (cp) => `&#X${cp.toString(16).toUpperCase()};`,
    ),
  ],
  ['percent: encodeURIComponent', encodeURIComponent(HARD)],
  ['percent: lower-case hex', encodeURIComponent(HARD).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase())],
  ["percent: RFC 3986 strict (!*'() too)", pct(HARD, /[A-Za-z0-9\-._~]/, true)],
  ['percent: every byte, lower case', pct(HARD, /$^/, false)],
  ['percent: form-encoded', new URLSearchParams({ k: HARD }).toString().slice(2)],
  ['hex, lower case', Buffer.from(HARD).toString('hex')],
  ['hex, upper case', Buffer.from(HARD).toString('hex').toUpperCase()],
  ['base64', Buffer.from(HARD).toString('base64')],
  ['base64 url-safe', Buffer.from(HARD).toString('base64url')],
];

describe('secret scrubbing over the common encodings (issue 47)', () => {
  const values = [HARD];
  it.each(ENCODED)('%s', (_name, encoded) => {
    expect(encoded).not.toBe(HARD);
    const text = `{"echo": "${encoded}", "after": 1}`;
    expect(scrubSecrets(text, secretForms(values), secretParts(values))).toBe('{"echo": "****", "after": 1}');
  });

  it('masks only the secret: the escapes around it stay as they were', () => {
    const text = `a\\u0026b ${units(HARD, () => true)} &lt;c&gt; \\/d`;
    expect(scrubSecrets(text, secretForms(values), secretParts(values))).toBe('a\\u0026b **** &lt;c&gt; \\/d');
  });

  it('a mix of escapes in one occurrence, and several occurrences, each masked', () => {
    const secret = 'abc/def&ghi';
    const mixed = `x \\u0061bc\\/def&amp;ghi y abc&#x2F;def\\u0026ghi z`;
    expect(scrubSecrets(mixed, secretForms([secret]), secretParts([secret]))).toBe('x **** y **** z');
  });

  it('text that only looks escaped is left alone', () => {
    const text = 'an \\\\u0041 escaped backslash, &bogus; and &#x110000; are not escapes of anything';
    expect(scrubSecrets(text, secretForms(['AAAA-unrelated']), secretParts(['AAAA-unrelated']))).toBe(text);
  });
});

const op = (path: string, params: ApiOperation['params']): ApiOperation => ({ method: 'get', path, params, body: 'none' });

describe('path and header arguments', () => {
  const provider = { server_url: 'https://api.example/v1', auth: { type: 'api_key_header', name: 'X-Api-Key' } };
  const files = op('/files/{name}', [{ name: 'name', in: 'path' }]);

  it('refuses . and .. path arguments, also percent-encoded (once or twice) or as a segment', () => {
    for (const name of ['.', '..', '%2e%2e', '%2E.', '.%2e', '%252e%252e', '../admin', 'a/../../b', '..\\x', '%2e%2e%2fadmin']) {
      expect(() => buildRequest(provider, files, { name }, { secret: 'k' }), name).toThrow(/may not be/);
    }
    expect(buildRequest(provider, files, { name: 'a..b' }, {}).url.pathname).toBe('/v1/files/a..b');
    expect(buildRequest(provider, files, { name: '...' }, {}).url.pathname).toBe('/v1/files/...');
    expect(buildRequest(provider, files, { name: 'a/b' }, {}).url.pathname).toBe('/v1/files/a%2Fb');
  });

  it('refuses reserved header parameters and the provider auth header at call time', () => {
    for (const name of ['Host', 'content-length', 'Transfer-Encoding', 'Connection', 'X-Api-Key']) {
      expect(() => buildRequest(provider, op('/x', [{ name, in: 'header' }]), { [name]: 'evil.example' }, { secret: 'k' }), name).toThrow(
        /reserved|authentication/,
      );
    }
    const bearer = { server_url: 'https://api.example', auth: { type: 'bearer' } };
    expect(() =>
      buildRequest(bearer, op('/x', [{ name: 'Authorization', in: 'header' }]), { Authorization: 'x' }, { secret: 'k' }),
    ).toThrow(/authentication/);
    // Without bearer auth, Authorization is an ordinary parameter.
    const none = { server_url: 'https://api.example', auth: { type: 'none' } };
    const r = buildRequest(none, op('/x', [{ name: 'Authorization', in: 'header' }]), { Authorization: 'Bearer mine' }, {});
    expect((r.init.headers as Record<string, string>).authorization).toBe('Bearer mine');
  });

  it('finds refused header parameters at import, naming the tool', () => {
    const tools = [
      { name: 't1', operation: op('/x', [{ name: 'X-Units', in: 'header' }]) },
      { name: 't2', operation: op('/y', [{ name: 'Host', in: 'header' }]) },
    ];
    expect(headerParamProblem(tools, { type: 'none' })).toMatch(/^t2: .*"Host" is reserved/);
    expect(headerParamProblem([tools[0]!], { type: 'api_key_header', name: 'x-units' })).toMatch(/^t1: .*authentication/);
    expect(headerParamProblem([tools[0]!], { type: 'bearer' })).toBeNull();
  });

  it('tells a URL with userinfo', () => {
    expect(hasUserinfo('https://u:p@api.example/')).toBe(true);
    expect(hasUserinfo('https://u@api.example/')).toBe(true);
    expect(hasUserinfo('https://api.example/a@b')).toBe(false);
  });
});

describe('log redaction', () => {
  it('censors credential headers of logged requests and upstream calls', () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) });
    const log = pino({ redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
    log.info(
      {
        req: { headers: { authorization: 'Bearer t0k', cookie: 'sid=c00k', 'x-api-key': 'k3y', 'x-inner-api-key': 'inn3r' } },
        call: { headers: { authorization: 'Basic YWxpY2U6cHc=', 'proxy-authorization': 'pr0xy', 'x-api-key': 'k3y2' } },
        secret: 'top',
      },
      'x',
    );
    const text = lines.join('');
    for (const s of ['t0k', 'c00k', 'k3y', 'inn3r', 'YWxpY2U6cHc', 'pr0xy', 'top']) expect(text).not.toContain(s);
  });
});
