/**
 * The maps a maintainer reads first stay true (issue 46): docs/ARCHITECTURE.md "Where things live" names every
 * tracked folder two levels deep and nothing that does not exist; docs/seeds/README.md's table of where each seed piece
 * lives points at files that exist and, where it writes a symbol right after a file, a file that holds it; docs/README.md's
 * Concepts table has one row per concept of the seeds.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const read = (rel: string) => fs.readFileSync(path.join(ROOT, rel), 'utf8');

/** Tracked folders, one and two levels deep (git's index, so nothing generated or ignored counts). */
function trackedFolders(): { top: Set<string>; second: Map<string, Set<string>> } {
  const out = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  const top = new Set<string>();
  const second = new Map<string, Set<string>>();
  for (const file of out.split('\0').filter(Boolean)) {
    const parts = file.split('/');
    if (parts.length < 2) continue;
    top.add(parts[0]!);
    if (parts.length >= 3) {
      const s = second.get(parts[0]!) ?? new Set<string>();
      s.add(parts[1]!);
      second.set(parts[0]!, s);
    }
  }
  return { top, second };
}

/** The "Where things live" block as entries: the name in the first column and the text of its lines. */
function whereThingsLive(markdown: string): Map<string, string> {
  const at = markdown.indexOf('## Where things live');
  if (at < 0) throw new Error('no "Where things live" section');
  const open = markdown.indexOf('```\n', at);
  const block = markdown.slice(open + 4, markdown.indexOf('```\n', open + 4));
  const entries = new Map<string, string>();
  let current = '';
  for (const line of block.split('\n')) {
    if (!line.trim()) continue;
    if (/^\S/.test(line)) {
      current = line.split(/\s+/)[0]!;
      if (entries.has(current)) throw new Error(`"${current}" is named twice`);
      entries.set(current, line.slice(current.length));
    } else entries.set(current, `${entries.get(current)} ${line.trim()}`);
  }
  return entries;
}

/** The entries that miss a tracked folder, and the names that do not exist. */
function mapProblems(
  entries: Map<string, string>,
  top: Set<string>,
  second: Map<string, Set<string>>,
  exists: (rel: string) => boolean,
): string[] {
  const problems: string[] = [];
  for (const name of entries.keys()) if (!exists(name.replace(/\/$/, ''))) problems.push(`${name} does not exist`);
  for (const dir of top) {
    const text = entries.get(`${dir}/`);
    if (text === undefined) {
      problems.push(`${dir}/ is not named`);
      continue;
    }
    for (const sub of second.get(dir) ?? []) {
      if (!new RegExp(`(^|[\\s(/])${sub.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/`).test(text)) {
        problems.push(`${dir}/${sub}/ is not named in the ${dir}/ entry`);
      }
    }
  }
  return problems;
}

describe('docs/ARCHITECTURE.md "Where things live"', () => {
  it('names every tracked folder two levels deep, and only what exists', () => {
    const { top, second } = trackedFolders();
    const entries = whereThingsLive(read('docs/ARCHITECTURE.md'));
    expect(mapProblems(entries, top, second, (rel) => fs.existsSync(path.join(ROOT, rel)))).toEqual([]);
  });

  it('reports a folder the map misses and a name that does not exist', () => {
    const entries = whereThingsLive('## Where things live\n```\napi/    the api: turns/ (start)\ngone/   an old folder\n```\n');
    const problems = mapProblems(
      entries,
      new Set(['api', 'web']),
      new Map([['api', new Set(['turns', 'console'])]]),
      (rel) => rel !== 'gone',
    );
    expect(problems.sort()).toEqual(['api/console/ is not named in the api/ entry', 'gone/ does not exist', 'web/ is not named']);
  });
});

/** Each row of the seeds' "Where each named piece lives here" table: the code spans of its second column. */
function seedMapRows(markdown: string): { piece: string; cell: string }[] {
  const at = markdown.indexOf('## Where each named piece lives here');
  const rows: { piece: string; cell: string }[] = [];
  for (const line of markdown.slice(at).split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || cells[1] === 'Seed name' || /^-+$/.test(cells[1]!)) continue;
    rows.push({ piece: cells[1]!, cell: cells[2]! });
  }
  return rows;
}

const isPath = (s: string) => /^[a-z][\w./-]*\.(ts|js|go|md)$/.test(s) || /^[a-z][\w-]*(\/[\w.-]+)*\/$/.test(s);

describe("docs/seeds/README.md's map of the seeds' pieces", () => {
  it('points at files that exist, and a symbol named beside a file is in it', () => {
    const rows = seedMapRows(read('docs/seeds/README.md'));
    expect(rows.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const { piece, cell } of rows) {
      let dir = '';
      for (const [, span] of cell.matchAll(/`([^`]+)`/g)) {
        if (!isPath(span!)) continue;
        // A bare file name is in the folder the row named last (`activities/run-agent/` then `consume.ts`).
        const rel = span!.includes('/') ? span! : path.posix.join(dir, span!);
        if (!fs.existsSync(path.join(ROOT, rel))) problems.push(`${piece}: ${rel} does not exist`);
        dir = span!.endsWith('/') ? rel : path.posix.dirname(rel);
      }
      // A symbol written right after its file (`api/turns/start.ts` `startTurn`, or in parentheses) is in that file.
      for (const [, file, symbol] of cell.matchAll(/`([a-z][\w./-]*\.(?:ts|js|go))` \(?`([A-Za-z_][\w.]*)`/g)) {
        const name = symbol!.split('.').pop()!;
        if (fs.existsSync(path.join(ROOT, file!)) && !read(file!).includes(name)) {
          problems.push(`${piece}: ${name} is not in ${file}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});

describe("docs/README.md's Concepts table", () => {
  it('has one row for each concept of the seeds, each pointing at a section', () => {
    const text = read('docs/README.md');
    const table = text.slice(text.indexOf('**Concepts**'));
    for (const concept of ['Config version', 'Binding', 'Session snapshot', 'Thought', 'ask_human form', 'Stop']) {
      expect(table, concept).toMatch(new RegExp(`^\\| ${concept} \\|.*\\]\\([^)]+\\.md#[^)]+\\)`, 'm'));
    }
  });
});
