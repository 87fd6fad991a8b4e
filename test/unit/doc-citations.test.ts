/**
 * Every document the code cites exists, and so does the section it names (docs/README.md "Citing"): a path ending in
 * `.md` (from the project root; `../` prefixes of a relative URL dropped), optionally followed by a section — `"Title"`
 * (the start of a heading's text) or `§N` (a numbered heading) — and the short forms `README "…"` (the top-level
 * README.md), `ARCHITECTURE "…"` / `PROTOCOL §N` (docs/), `docs/seeds/NNN` (a seed file). Scanned: the project's
 * source, config and Markdown files (not node_modules, generated code, recorded results, fixtures or the verbatim seeds).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const SKIP_DIRS = new Set(['node_modules', '.git', '.data', '.cache', 'dist', 'test-results', 'coverage', 'scratch']);
const SKIP_PATHS = ['bench/results', 'test/fixtures', 'core/generated', 'docs/seeds', 'sandbox/vendor'];
/** This file: its examples of broken citations are not citations. */
const SELF = 'test/unit/doc-citations.test.ts';
const SCANNED = /\.(ts|js|mjs|cjs|go|ya?ml|json|sh|md)$|^Dockerfile$|^run$/;

function files(dir = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = dir ? `${dir}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (!SKIP_DIRS.has(e.name) && !SKIP_PATHS.includes(rel)) out.push(...files(rel));
    } else if (SCANNED.test(e.name) && e.name !== 'package-lock.json' && rel !== SELF) out.push(rel);
  }
  return out;
}

/** The headings of a Markdown file, as plain text (no `#`, backticks or emphasis). */
const headingCache = new Map<string, string[]>();
function headings(file: string): string[] {
  let h = headingCache.get(file);
  if (!h) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
    h = [...text.matchAll(/^#{1,6} +(.+)$/gm)].map((m) => m[1]!.replace(/[`*_]/g, '').trim());
    headingCache.set(file, h);
  }
  return h;
}

function sectionExists(file: string, section: string): boolean {
  const plain = section.replace(/[`*_]/g, '');
  if (plain.startsWith('§')) {
    const n = plain.slice(1).replace(/\.$/, '').replace(/\./g, '\\.');
    return headings(file).some((t) => new RegExp(`^${n}\\.?\\s`).test(t));
  }
  return headings(file).some((t) => t.startsWith(plain));
}

interface Citation {
  at: string;
  file: string;
  section?: string;
}

const SECTION = String.raw`(?: (§\d+(?:\.\d+)*)| \\?"([^"\\\n]+)\\?")?`;
const FORMS: { re: RegExp; file: (m: RegExpMatchArray) => string }[] = [
  // docs/PROTOCOL.md §2, bench/README.md "Knowledge", core/domain/llm/README.md, ../../core/llm/DEMO_MODEL.md
  {
    re: new RegExp(String.raw`(?<![\w/.\-])((?:[\w.\-]+/)+[\w.\-]+\.md)\b` + SECTION, 'g'),
    file: (m) => m[1]!.replace(/^(?:\.\.?\/)+/, ''),
  },
  // README "Two commands", README.md "Two commands" (the top-level one; a section is required)
  { re: new RegExp(String.raw`(?<![\w/.\-])README(?:\.md)?(?: (§\d+(?:\.\d+)*)| \\?"([^"\\\n]+)\\?")`, 'g'), file: () => 'README.md' },
  // ARCHITECTURE "One turn", PROTOCOL §3 (docs/; a section is required)
  {
    re: new RegExp(String.raw`(?<![\w/.\-])(ARCHITECTURE|PROTOCOL)(?:\.md)?(?: (§\d+(?:\.\d+)*)| \\?"([^"\\\n]+)\\?")`, 'g'),
    file: (m) => `docs/${m[1]}.md`,
  },
];

function citations(): Citation[] {
  const out: Citation[] = [];
  for (const f of files()) {
    const lines = fs.readFileSync(path.join(ROOT, f), 'utf8').split('\n');
    lines.forEach((line, i) => {
      const at = `${f}:${i + 1}`;
      for (const form of FORMS)
        for (const m of line.matchAll(form.re)) {
          const groups = m.slice(1).filter((g) => g !== undefined);
          const file = form.file(m);
          // For the path form the groups are [path, section?]; for the others [(name,) section].
          const section = form === FORMS[0] ? groups[1] : groups[groups.length - 1];
          out.push({ at, file, section });
        }
      for (const m of line.matchAll(/(?<![\w/.-])docs\/seeds\/(\d{3})(?!\d)/g)) out.push({ at, file: `docs/seeds/${m[1]}` });
    });
  }
  return out;
}

/** Where a cited path is: from the project root (code), or from the citing Markdown file's folder (a relative link).
 * A path whose first folder is not the project's (a workspace's `.dify_conf/…`, a URL's host) is no citation. */
function resolve(c: Citation): string | undefined {
  const from = c.at.slice(0, c.at.lastIndexOf(':'));
  const first = c.file.split('/')[0]!;
  if (fs.existsSync(path.join(ROOT, first))) return c.file;
  if (from.endsWith('.md')) {
    const dir = path.posix.dirname(from);
    if (!c.file.startsWith('../') && fs.existsSync(path.join(ROOT, dir, first))) return path.posix.join(dir, c.file);
  }
  return undefined;
}

function problem(c: Citation): string | undefined {
  if (/^docs\/seeds\/\d{3}$/.test(c.file)) {
    const n = c.file.slice('docs/seeds/'.length);
    return fs.readdirSync(path.join(ROOT, 'docs/seeds')).some((f) => f.startsWith(`${n}-`)) ? undefined : `${c.at}: no seed ${n}`;
  }
  const file = resolve(c);
  if (!file) return undefined;
  if (!fs.existsSync(path.join(ROOT, file))) return `${c.at}: ${c.file} does not exist`;
  if (c.section && c.section !== '…' && !sectionExists(file, c.section)) return `${c.at}: ${file} has no section ${c.section}`;
  return undefined;
}

describe('doc citations', () => {
  const all = citations();

  it('finds the citations it is meant to check (the scanner itself works)', () => {
    const cited = new Set(all.map((c) => `${c.file}${c.section ? ` ${c.section}` : ''}`));
    expect(cited.has('docs/ARCHITECTURE.md One turn')).toBe(true);
    expect(cited.has('docs/PROTOCOL.md §2')).toBe(true);
    expect(sectionExists('docs/PROTOCOL.md', '§3.1')).toBe(true);
    expect(sectionExists('docs/PROTOCOL.md', '§9')).toBe(false);
    expect(sectionExists('docs/ARCHITECTURE.md', 'No such section')).toBe(false);
    expect(problem({ at: 'x.ts:1', file: 'docs/no-such-page.md' })).toBe('x.ts:1: docs/no-such-page.md does not exist');
    expect(problem({ at: 'docs/README.md:1', file: 'decisions/README.md' })).toBeUndefined();
    expect(problem({ at: 'x.ts:1', file: '.dify_conf/prompt.md' })).toBeUndefined();
  });

  it('every cited document and section exists (rename a section together with its citations)', () => {
    expect(all.map(problem).filter(Boolean)).toEqual([]);
  });
});
