/**
 * docs/configuration.md against the zod config schema (core/platform/config.ts): its settings tables are what
 * `npm run docs:config` writes from the schema now, every variable of the schema is in the doc, and every variable
 * the doc names exists (or is `<NAME>_FILE` / `PREFIX_*` of one that does).
 */
import { describe, expect, it } from 'vitest';
import { EnvSchema } from '../../core/platform/config.js';
import { BEGIN, CONFIG_DOC, CONFIG_SOURCE, END, readProjectFile, readSections, renderSettings } from '../../scripts/docs-config.js';

const doc = readProjectFile(CONFIG_DOC);
const source = readProjectFile(CONFIG_SOURCE);
const names = Object.keys(EnvSchema.shape);

/** Backticked tokens that look like environment variables (`FOO_BAR`, `FOO_*`, `FOO_BAR_FILE`; one word only if the
 * schema has it: `CI`). */
function namedVariables(text: string): string[] {
  return [...text.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9*]+)*)`/g)].map((m) => m[1]!).filter((v) => v.includes('_') || names.includes(v));
}

describe('docs/configuration.md', () => {
  it('has the settings tables the schema gives now (run `npm run docs:config` after changing core/platform/config.ts)', () => {
    const a = doc.indexOf(BEGIN);
    const b = doc.indexOf(END);
    expect(a, 'the BEGIN marker').toBeGreaterThanOrEqual(0);
    expect(b, 'the END marker').toBeGreaterThan(a);
    expect(doc.slice(a, b + END.length)).toBe(renderSettings(source));
  });

  it('names every variable of the schema', () => {
    const inDoc = new Set(namedVariables(doc));
    expect(names.filter((n) => !inDoc.has(n))).toEqual([]);
  });

  it('names no variable the schema lacks', () => {
    const known = new Set(names);
    const unknown = namedVariables(doc).filter((v) => {
      if (known.has(v)) return false;
      if (v.endsWith('_FILE') && known.has(v.slice(0, -'_FILE'.length))) return false;
      if (v.endsWith('*')) return !names.some((n) => n.startsWith(v.slice(0, -1)));
      return true;
    });
    expect(unknown).toEqual([]);
  });

  it('reads every property of the schema from the source, in rows with a meaning', () => {
    const rows = readSections(source).flatMap((s) => s.rows);
    expect(rows.flatMap((r) => r.names).sort()).toEqual([...names].sort());
    expect(rows.filter((r) => !r.doc).map((r) => r.names.join(' / '))).toEqual([]);
  });
});
