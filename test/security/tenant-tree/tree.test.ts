/**
 * Issue 45, the shared primitives (core/domain/workspace-tree.ts) under a racer: a process of the workspace's own uid
 * swaps every entry with a symlink to a root-only 0600 file or 0700 directory in a tight loop while root copies or
 * removes the tree. The copy must carry no byte of the target (names included) and complete; the removal must leave
 * the target as it was. The same racer against Node's fs.cp and fs.rm (what fork and workspace removal used) is the
 * control: it shows the race is won on this machine, so the zero below means something.
 * Also the copy's rules without a racer: special files and a hard link to a file outside are skipped and reported, links
 * inside are kept, the budget is enforced, nothing is left under a temporary name, the sweeper removes leftovers.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import {
  copyTree,
  removeTree,
  sweepLeftovers,
  TreeBudgetExceeded,
  TreeWriter,
  type CopyReport,
} from '../../../core/domain/workspace-tree.js';
import { leaks, repeatFor, rootOnlyTarget, startRacer, targetIntact, tenantId, tenantWorkspace } from './racer.js';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'tree-race-'));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

const SPECS = [...Array.from({ length: 8 }, (_, i) => `f:f${i}`), ...Array.from({ length: 8 }, (_, i) => `d:d${i}`)];

/** A tenant workspace with some files of its own (so a copy takes a while) and the racer's pairs. */
function workspace(name: string, owner: { uid: number; gid: number }): string {
  const ws = tenantWorkspace(path.join(base, name), owner);
  for (let d = 0; d < 4; d++) {
    fs.mkdirSync(path.join(ws, `own${d}`));
    for (let f = 0; f < 25; f++) fs.writeFileSync(path.join(ws, `own${d}`, `n${f}.txt`), `own ${d}/${f}\n`.repeat(50));
  }
  execFileSync('chown', ['-R', `${owner.uid}:${owner.gid}`, ws]);
  return ws;
}

describe('copyTree under a racer', () => {
  it('copies no byte of a root-only file or directory the tenant swaps in, and completes every time', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-copy'));
    const owner = tenantId();
    const ws = workspace('copy-src', owner);
    const dest = path.join(base, 'copies');
    fs.mkdirSync(dest);
    const racer = await startRacer({ cwd: ws, owner, target, specs: SPECS });
    const reports: CopyReport[] = [];
    const leaked: string[] = [];
    let copies = 0;
    let swaps = 0;
    try {
      copies = await repeatFor(4_000, 10, async (i) => {
        const writer = await TreeWriter.create(path.join(dest, `c${i}`));
        reports.push(await copyTree(ws, writer, { budgetBytes: 1 << 30 }));
        await writer.commit();
        leaked.push(...leaks(path.join(dest, `c${i}`), target.token));
      });
    } finally {
      swaps = await racer.stop();
    }
    console.log(
      `copyTree: ${copies} copies under ${swaps} swaps, ${reports.reduce((n, r) => n + r.skippedTotal, 0)} entries skipped as changed, ${leaked.length} leaked`,
    );
    expect(swaps).toBeGreaterThan(1000);
    expect(leaked).toEqual([]);
    // The tenant's own files all arrive, every time (the racer only plays with its pairs).
    for (let i = 0; i < copies; i++) expect(fs.readFileSync(path.join(dest, `c${i}`, 'own3', 'n24.txt'), 'utf8')).toContain('own 3/24');
    expect(fs.readdirSync(dest).filter((n) => n.startsWith('.'))).toEqual([]);
    targetIntact(target);
  }, 60_000);

  it('the control: fs.cp under the same racer copies the root-only target into the copy', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-cp'));
    const owner = tenantId();
    const ws = workspace('cp-src', owner);
    const dest = path.join(base, 'cp-copies');
    fs.mkdirSync(dest);
    const racer = await startRacer({ cwd: ws, owner, target, specs: SPECS });
    const leaked: string[] = [];
    try {
      await repeatFor(4_000, 10, async (i) => {
        await fs.promises
          .cp(ws, path.join(dest, `c${i}`), { recursive: true, verbatimSymlinks: true, errorOnExist: true, force: false })
          .catch(() => undefined);
        leaked.push(...leaks(path.join(dest, `c${i}`), target.token));
      });
    } finally {
      await racer.stop();
    }
    console.log(`fs.cp control: ${leaked.length} paths of the target copied`);
    expect(leaked.length).toBeGreaterThan(0);
  }, 60_000);
});

describe('removeTree under a racer', () => {
  it('removes the workspace without removing, writing or chowning anything of the target; the sweeper finishes what a live process kept re-creating', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-rm'));
    const owner = tenantId();
    const results: boolean[] = [];
    let swaps = 0;
    const parent = path.join(base, 'rm-workspaces');
    fs.mkdirSync(parent);
    const removals = await repeatFor(3_000, 6, async (i) => {
      const ws = workspace(`rm-workspaces/w${i}`, owner);
      const racer = await startRacer({ cwd: ws, owner, target, specs: SPECS });
      try {
        results.push(await removeTree(ws));
      } finally {
        swaps += await racer.stop();
      }
      expect(fs.existsSync(ws)).toBe(false); // its path is free at once (renamed to a trash name first)
      targetIntact(target);
    });
    console.log(`removeTree: ${removals} removals under ${swaps} swaps, ${results.filter((r) => !r).length} left to the sweeper`);
    expect(swaps).toBeGreaterThan(100);
    // With the racers stopped, the sweeper removes what they kept re-creating; nothing else is left.
    await sweepLeftovers(parent, { olderThanMs: 0 });
    expect(fs.readdirSync(parent)).toEqual([]);
    targetIntact(target);
  }, 60_000);

  it('the control: fs.rm under the same racer removes files of the root-only target', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-fsrm'));
    const owner = tenantId();
    let hit = false;
    await repeatFor(3_000, 8, async (i) => {
      if (hit) return;
      const ws = workspace(`fsrm-w${i}`, owner);
      const racer = await startRacer({ cwd: ws, owner, target, specs: SPECS });
      try {
        await fs.promises.rm(ws, { recursive: true, force: true }).catch(() => undefined);
      } finally {
        await racer.stop();
      }
      hit = fs.readdirSync(target.dir, { recursive: true }).length < Object.keys(target.before).length - 1;
    });
    console.log(`fs.rm control: target damaged: ${hit}`);
    expect(hit).toBe(true);
  }, 60_000);
});

describe('copyTree rules', () => {
  it('skips FIFOs, sockets and a hard link to a file outside (reported), keeps links inside and symlinks as text', async () => {
    const src = path.join(base, 'rules-src');
    fs.mkdirSync(path.join(src, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(src, 'a', 'b', 'f.txt'), 'hello');
    fs.linkSync(path.join(src, 'a', 'b', 'f.txt'), path.join(src, 'a', 'same.txt'));
    fs.symlinkSync('/etc/passwd', path.join(src, 'link'));
    execFileSync('mkfifo', [path.join(src, 'pipe')]);
    execFileSync('python3', ['-c', `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(path.join(src, 'sock'))})`]);
    fs.writeFileSync(path.join(base, 'outside.txt'), 'outside');
    fs.linkSync(path.join(base, 'outside.txt'), path.join(src, 'out.txt'));
    const writer = await TreeWriter.create(path.join(base, 'rules-dst'));
    const report = await copyTree(src, writer, { budgetBytes: 1 << 20 });
    await writer.commit();
    const dst = path.join(base, 'rules-dst');
    expect(report.skipped.sort((x, y) => x.path.localeCompare(y.path))).toEqual([
      { path: 'out.txt', reason: 'hard_link' },
      { path: 'pipe', reason: 'fifo' },
      { path: 'sock', reason: 'socket' },
    ]);
    expect(report.skippedTotal).toBe(3);
    expect(fs.readFileSync(path.join(dst, 'a', 'same.txt'), 'utf8')).toBe('hello');
    expect(fs.statSync(path.join(dst, 'a', 'same.txt')).ino).toBe(fs.statSync(path.join(dst, 'a', 'b', 'f.txt')).ino);
    expect(fs.readlinkSync(path.join(dst, 'link'))).toBe('/etc/passwd');
    expect(fs.existsSync(path.join(dst, 'out.txt'))).toBe(false);
    expect(report.entries).toBe(5); // a, a/b, a/b/f.txt, a/same.txt, link
  });

  it('refuses a tree over its budget; abort leaves nothing under the temporary name', async () => {
    const src = path.join(base, 'budget-src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'big.bin'), Buffer.alloc(64 * 1024));
    const parent = path.join(base, 'budget-dst');
    const writer = await TreeWriter.create(path.join(parent, 'x'));
    await expect(copyTree(src, writer, { budgetBytes: 32 * 1024 })).rejects.toBeInstanceOf(TreeBudgetExceeded);
    await writer.abort();
    expect(fs.readdirSync(parent)).toEqual([]);
  });

  it('a file the tree’s owner could not read itself is skipped (not_readable), not copied by root', async () => {
    const owner = tenantId();
    const src = tenantWorkspace(path.join(base, 'unreadable-src'), owner);
    fs.writeFileSync(path.join(src, 'root-only.txt'), 'root only', { mode: 0o600 }); // root's, 0600, in the tenant's tree
    fs.writeFileSync(path.join(src, 'mine.txt'), 'mine');
    fs.chownSync(path.join(src, 'mine.txt'), owner.uid, owner.gid);
    const writer = await TreeWriter.create(path.join(base, 'unreadable-dst'));
    const report = await copyTree(src, writer, { budgetBytes: 1 << 20 });
    await writer.commit();
    expect(report.skipped).toEqual([{ path: 'root-only.txt', reason: 'not_readable' }]);
    expect(fs.readdirSync(path.join(base, 'unreadable-dst'))).toEqual(['mine.txt']);
  });

  it('the sweeper removes partial copies and trash older than an hour, and nothing else', async () => {
    const dir = path.join(base, 'sweep');
    fs.mkdirSync(dir);
    const old = Date.now() - 2 * 3_600_000;
    const uuid = '0b8f3f7e-4d7c-4b59-9d7e-2a1c3b4d5e6f';
    fs.mkdirSync(path.join(dir, `.partial-${old}-${uuid}`, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, `.trash-${old}-${uuid}`), 'x');
    const now = Date.now();
    fs.mkdirSync(path.join(dir, `.partial-${now}-${uuid}`)); // a copy in progress
    fs.mkdirSync(path.join(dir, uuid)); // a workspace
    const removed = await sweepLeftovers(dir);
    expect(removed.sort()).toEqual([`.partial-${old}-${uuid}`, `.trash-${old}-${uuid}`].sort());
    expect(fs.readdirSync(dir).sort()).toEqual([`.partial-${now}-${uuid}`, uuid].sort());
  });
});
