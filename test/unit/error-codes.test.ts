/**
 * The error-code registry (core/protocol/error-codes.ts) against what uses it: docs/PROTOCOL.md's error tables are what
 * `npm run docs:errors` writes now, the OpenAPI error `code` enum is the registry's, every code the source raises with a
 * status is registered with that status, and every registered code is raised somewhere (no dead entries).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../api/openapi/index.js';
import { projectRoot } from '../../core/platform/project-root.js';
import { ERROR_CODE_LIST, ERROR_CODES, isErrorCode } from '../../core/protocol/error-codes.js';
import { BEGIN, END, PROTOCOL_DOC, readProjectFile, renderErrorTables } from '../../scripts/docs-errors.js';

const ROOT = projectRoot(import.meta.url);
const REGISTRY = 'core/protocol/error-codes.ts';
/** Where codes are raised: the api, core, the agent backend, the turn (not tests, docs or generated code). */
const SOURCE_ROOTS = ['api', 'core', 'agent-backend', 'activities', 'turn', 'workflows', 'worker', 'stack', 'worker.ts'];

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    const abs = path.join(ROOT, rel);
    if (!fs.existsSync(abs)) return;
    if (fs.statSync(abs).isDirectory()) {
      if (rel.includes('generated') || rel.includes('node_modules')) return;
      for (const e of fs.readdirSync(abs)) walk(path.join(rel, e));
    } else if (rel.endsWith('.ts') && !rel.endsWith('.test.ts') && rel !== REGISTRY) out.push(rel);
  };
  SOURCE_ROOTS.forEach(walk);
  return out;
}

const sources = sourceFiles().map((file) => ({ file, text: fs.readFileSync(path.join(ROOT, file), 'utf8') }));

/**
 * A code next to its status: `new HttpError(409, 'conversation_busy'`, `KnowledgeError(413, '…'`, `refuse(429, '…'`,
 * `sendError(res, 400, '…'`, `[431, '…'`, `turnFailure('…', 404`, `{ code: '…', status: 400`.
 */
const RAISES: readonly { re: RegExp; code: number; status: number }[] = [
  { re: /\b([45]\d\d),\s*'([a-z][a-z0-9_]*)'/g, status: 1, code: 2 },
  { re: /turnFailure\(\s*'([a-z][a-z0-9_]*)',\s*([45]\d\d)\b/g, code: 1, status: 2 },
  { re: /code: '([a-z][a-z0-9_]*)',\s*status: ([45]\d\d)\b/g, code: 1, status: 2 },
];

function raisedCodes(): { code: string; status: number; file: string }[] {
  const out: { code: string; status: number; file: string }[] = [];
  for (const { file, text } of sources)
    for (const { re, code, status } of RAISES)
      for (const m of text.matchAll(re)) out.push({ code: m[code]!, status: Number(m[status]), file });
  return out;
}

describe('the error-code registry', () => {
  it('is what docs/PROTOCOL.md shows (run `npm run docs:errors` after changing core/protocol/error-codes.ts)', () => {
    const doc = readProjectFile(PROTOCOL_DOC);
    const a = doc.indexOf(BEGIN);
    const b = doc.indexOf(END);
    expect(a, 'the BEGIN marker').toBeGreaterThanOrEqual(0);
    expect(b, 'the END marker').toBeGreaterThan(a);
    expect(doc.slice(a, b + END.length)).toBe(renderErrorTables());
  });

  it("is the OpenAPI document's error code enum", () => {
    const doc = openApiDocument() as { components: { schemas: { ErrorResponse: { properties: { code: { enum?: string[] } } } } } };
    expect(doc.components.schemas.ErrorResponse.properties.code.enum).toEqual(ERROR_CODE_LIST);
  });

  it('holds every code the source raises with a status, with that status', () => {
    const raised = raisedCodes();
    expect(raised.length, 'the scan finds the throw sites').toBeGreaterThan(150);
    const unknown = raised.filter((r) => !isErrorCode(r.code)).map((r) => `${r.file}: ${r.code}`);
    expect(unknown).toEqual([]);
    const wrongStatus = raised
      .filter((r) => isErrorCode(r.code) && !(ERROR_CODES[r.code].status as readonly number[]).includes(r.status))
      .map((r) => `${r.file}: ${r.code} ${r.status}`);
    expect(wrongStatus).toEqual([]);
  });

  it('holds every code the web pages compare against', () => {
    const web = fs.readdirSync(path.join(ROOT, 'web')).filter((f) => f.endsWith('.js'));
    const compared = web.flatMap((f) =>
      [...fs.readFileSync(path.join(ROOT, 'web', f), 'utf8').matchAll(/\bcode === '([a-z][a-z0-9_]*)'/g)].map((m) => ({ f, code: m[1]! })),
    );
    expect(compared.length, 'the pages compare codes').toBeGreaterThan(0);
    expect(compared.filter(({ code }) => !isErrorCode(code)).map(({ f, code }) => `web/${f}: ${code}`)).toEqual([]);
  });

  it('holds no code the source never uses', () => {
    const unused = ERROR_CODE_LIST.filter((code) => !sources.some(({ text }) => text.includes(`'${code}'`)));
    expect(unused).toEqual([]);
  });

  it('gives every code a status, an audience and a meaning', () => {
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(info.status.length, code).toBeGreaterThan(0);
      expect(info.audience.length, code).toBeGreaterThan(0);
      expect(info.meaning.trim().length, code).toBeGreaterThan(10);
    }
  });
});
