/**
 * Issue 45, every other path on which a root process touches a workspace its tenant can change at the same moment —
 * placing a turn's uploads, collecting outputs/, preparing the workspace before a command, the workspace marker — each
 * run as root again and again while a process of the workspace's own uid swaps its entries for symlinks to a root-only
 * 0600 file / 0700 directory (racer.c, as in tree.test.ts and fork.test.ts). Each must complete or refuse cleanly, bring
 * no byte (nor name) of the target anywhere the tenant reads, and leave the target as it was. Each has its control: the
 * same operation done by path (what a plain fs call does) under the same racer, showing the race is won on this
 * machine, so the zeros mean something.
 * The functions under test are the ones the product calls: placeWorkspaceFile (activities/prepare/workspace-files.ts
 * placeTurnFiles), listOutputs/readOutputFile (the backend's and the api's outputs/ collection), ensureWorkspaceDirs
 * (agent-backend/workspace/sandbox.ts before every command) and checkWorkspaceMarker (the runtime layer on entry, with
 * an earlier release's in-tree marker).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureWorkspaceDirs } from '../../../agent-backend/workspace/ensure.js';
import { LEGACY_MARKER_FILE, markerPath, removeMarker } from '../../../core/domain/workspace-marker.js';
import { checkWorkspaceMarker } from '../../../agent-backend/workspace/marker.js';
import { placeWorkspaceFile, WorkspaceRefused } from '../../../core/domain/workspace-fs.js';
import { listOutputs, readOutputFile } from '../../../core/domain/workspace-outputs.js';
import { listWorkspaceDir } from '../../../core/domain/workspace-fs.js';
import { leaks, repeatFor, rootOnlyTarget, startRacer, targetIntact, tenantId, tenantWorkspace } from './racer.js';

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'paths-race-'));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

/** The workspaces directory of these tests (markers live in its .markers, as in WORKSPACES_DIR). */
const workspaces = path.join(base, 'workspaces');
fs.mkdirSync(workspaces, { mode: 0o755 });

function newWorkspace(owner: { uid: number; gid: number }): string {
  return tenantWorkspace(path.join(workspaces, crypto.randomUUID()), owner);
}

/** Regular files called `name` under `dir`, walked with lstat (readdir's `recursive` would descend into the racer's links). */
function filesNamed(dir: string, name: string): string[] {
  const out: string[] = [];
  for (const n of fs.readdirSync(dir)) {
    const p = path.join(dir, n);
    const st = fs.lstatSync(p);
    if (st.isDirectory()) out.push(...filesNamed(p, name));
    else if (st.isFile() && n === name) out.push(p);
  }
  return out;
}

/** Every error an operation may end with under the racer: a refusal naming the path, never another error. */
function expectRefusal(err: unknown): void {
  expect(err).toBeInstanceOf(WorkspaceRefused);
}

describe('placing a turn’s uploads (uploads/<message id>/<name>) under a racer', () => {
  it('writes nothing into the root-only directory the tenant swaps in for uploads/; each file is placed inside or refused', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-uploads'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, 'uploads'));
    fs.chownSync(path.join(ws, 'uploads'), owner.uid, owner.gid);
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['d:uploads'] });
    let placed = 0;
    let refused = 0;
    let swaps = 0;
    try {
      await repeatFor(2_000, 40, async (i) => {
        try {
          await placeWorkspaceFile(ws, ['uploads', `m${i}`], 'photo.png', Buffer.from(`upload ${i}\n`), { owner });
          placed++;
        } catch (err) {
          expectRefusal(err);
          refused++;
        }
      });
    } finally {
      swaps = await racer.stop();
    }
    console.log(`uploads: ${placed} placed, ${refused} refused under ${swaps} swaps`);
    expect(swaps).toBeGreaterThan(1000);
    expect(placed).toBeGreaterThan(0);
    targetIntact(target);
    // What was placed is the tenant's: inside the workspace (under whichever name the racer left the directory), its own.
    const found = filesNamed(ws, 'photo.png');
    expect(found.length).toBe(placed);
    for (const f of found) expect(fs.lstatSync(f).uid).toBe(owner.uid);
  }, 60_000);

  it('the control: mkdir -p + writeFile by path under the same racer writes into the root-only directory', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-uploads-control'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, 'uploads'));
    fs.chownSync(path.join(ws, 'uploads'), owner.uid, owner.gid);
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['d:uploads'] });
    try {
      await repeatFor(2_000, 40, async (i) => {
        const dir = path.join(ws, 'uploads', `m${i}`);
        await fs.promises.mkdir(dir, { recursive: true }).catch(() => undefined);
        await fs.promises.writeFile(path.join(dir, 'photo.png'), `upload ${i}\n`).catch(() => undefined);
      });
    } finally {
      await racer.stop();
    }
    const planted = fs.readdirSync(target.dir).filter((n) => /^m\d+$/.test(n));
    console.log(`uploads control: ${planted.length} directories written into the root-only directory`);
    expect(planted.length).toBeGreaterThan(0);
  }, 60_000);
});

describe('collecting outputs/ under a racer', () => {
  it('lists and reads no byte or name of the root-only file or directory swapped in for outputs/ or outputs/report.txt', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-outputs'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, 'outputs'));
    fs.writeFileSync(path.join(ws, 'outputs', 'report.txt'), 'tenant report\n');
    fs.chownSync(path.join(ws, 'outputs'), owner.uid, owner.gid);
    fs.chownSync(path.join(ws, 'outputs', 'report.txt'), owner.uid, owner.gid);
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['f:outputs/report.txt', 'd:outputs'] });
    const seen: string[] = [];
    let reads = 0;
    let refused = 0;
    let swaps = 0;
    try {
      await repeatFor(2_000, 40, async () => {
        seen.push(...(await listWorkspaceDir(ws, ['outputs'])).keys());
        for (const name of [...(await listOutputs(ws)).keys(), 'report.txt', 'report.txt~', 'secrets.json']) {
          try {
            seen.push((await readOutputFile(ws, name, 1 << 20)).toString('latin1'));
            reads++;
          } catch (err) {
            expectRefusal(err);
            refused++;
          }
        }
      });
    } finally {
      swaps = await racer.stop();
    }
    console.log(`outputs: ${reads} files read, ${refused} refused under ${swaps} swaps`);
    expect(swaps).toBeGreaterThan(1000);
    expect(reads).toBeGreaterThan(0);
    expect(seen.filter((s) => s.includes(target.token))).toEqual([]);
    targetIntact(target);
  }, 60_000);

  it('the control: readdir + readFile by path under the same racer reads the root-only file', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-outputs-control'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, 'outputs'));
    fs.writeFileSync(path.join(ws, 'outputs', 'report.txt'), 'tenant report\n');
    execChown(path.join(ws, 'outputs'), owner);
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['f:outputs/report.txt', 'd:outputs'] });
    let hits = 0;
    try {
      await repeatFor(2_000, 40, async () => {
        const names = await fs.promises.readdir(path.join(ws, 'outputs')).catch(() => [] as string[]);
        if (names.some((n) => n.includes(target.token))) hits++;
        const body = await fs.promises.readFile(path.join(ws, 'outputs', 'report.txt'), 'latin1').catch(() => '');
        if (body.includes(target.token)) hits++;
      });
    } finally {
      await racer.stop();
    }
    console.log(`outputs control: ${hits} reads of the root-only target`);
    expect(hits).toBeGreaterThan(0);
  }, 60_000);
});

describe('collecting outputs/: a host file with one link the tenant could not read itself', () => {
  it('is never read: a root-only file hard-linked into outputs/ keeps one link once the host renames a new version over its name', async () => {
    // Where fs.protected_hardlinks=0 the tenant may hard-link any file it can reach the path of (this host has 1, so
    // root makes the link on its behalf); the nlink check refuses it until the host replaces the file by a rename, as
    // local-secrets.ts writes secrets.json: then the old version's only link is the tenant's outputs/ entry.
    const target = rootOnlyTarget(path.join(base, 'target-outputs-hardlink'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, 'outputs'));
    fs.chownSync(path.join(ws, 'outputs'), owner.uid, owner.gid);
    fs.writeFileSync(path.join(ws, 'outputs', 'report.txt'), 'tenant report\n');
    fs.chownSync(path.join(ws, 'outputs', 'report.txt'), owner.uid, owner.gid);
    const linked = path.join(ws, 'outputs', 'secrets.json');
    fs.linkSync(target.file, linked);
    await expect(readOutputFile(ws, 'secrets.json', 1 << 20)).rejects.toThrow('a hard link');
    const renamed = `${target.file}.tmp`;
    fs.writeFileSync(renamed, '{}', { mode: 0o600 });
    fs.renameSync(renamed, target.file);
    expect(fs.lstatSync(linked)).toMatchObject({ nlink: 1, uid: 0, mode: 0o100600 });
    expect([...(await listOutputs(ws)).keys()].sort()).toEqual(['report.txt', 'secrets.json']);
    let read: string | null = null;
    try {
      read = (await readOutputFile(ws, 'secrets.json', 1 << 20)).toString('latin1');
    } catch (err) {
      expectRefusal(err);
      expect((err as Error).message).toBe("not readable by the workspace's owner");
    }
    expect(read?.includes(target.token) ?? false).toBe(false);
    expect(read).toBeNull();
    // The tenant's own files are read as before, whatever their mode (its own: it may chmod them).
    fs.chmodSync(path.join(ws, 'outputs', 'report.txt'), 0o000);
    expect((await readOutputFile(ws, 'report.txt', 1 << 20)).toString()).toBe('tenant report\n');
  });
});

function execChown(p: string, owner: { uid: number; gid: number }): void {
  for (const e of [p, ...fs.readdirSync(p).map((n) => path.join(p, n))]) fs.lchownSync(e, owner.uid, owner.gid);
}

describe('preparing the workspace before a command (.tmp and outputs/ made and given to its uid) under a racer', () => {
  it('chowns only the directories it opened: the root-only directory swapped in for either stays root’s', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-prep'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    // Root-owned, as the backend leaves them before they are given away (a directory the agent removed and the backend made again).
    fs.mkdirSync(path.join(ws, '.tmp'));
    fs.mkdirSync(path.join(ws, 'outputs'));
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['d:.tmp', 'd:outputs'] });
    let runs = 0;
    let swaps = 0;
    try {
      runs = await repeatFor(2_000, 200, async () => {
        ensureWorkspaceDirs(ws, owner);
      });
    } finally {
      swaps = await racer.stop();
    }
    console.log(`prepare: ${runs} preparations under ${swaps} swaps`);
    expect(swaps).toBeGreaterThan(1000);
    targetIntact(target);
    // With the racer gone, one more preparation leaves both as the tenant's own directories.
    for (const n of ['.tmp', 'outputs', '.tmp~', 'outputs~']) {
      const p = path.join(ws, n);
      if (fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink()) fs.unlinkSync(p);
    }
    ensureWorkspaceDirs(ws, owner);
    for (const n of ['.tmp', 'outputs']) expect(fs.lstatSync(path.join(ws, n))).toMatchObject({ uid: owner.uid, gid: owner.gid });
    expect(fs.lstatSync(ws)).toMatchObject({ uid: owner.uid, gid: owner.gid });
  }, 60_000);

  it('leaves a link or a file the agent put at .tmp or outputs as it is, and makes a missing one', () => {
    const owner = tenantId();
    const ws = newWorkspace(owner);
    const elsewhere = fs.mkdtempSync(path.join(base, 'elsewhere-'));
    fs.symlinkSync(elsewhere, path.join(ws, 'outputs'));
    fs.writeFileSync(path.join(ws, '.tmp'), 'a file');
    ensureWorkspaceDirs(ws, owner);
    expect(fs.lstatSync(path.join(ws, 'outputs')).isSymbolicLink()).toBe(true);
    expect(fs.lstatSync(elsewhere)).toMatchObject({ uid: 0 });
    expect(fs.readFileSync(path.join(ws, '.tmp'), 'utf8')).toBe('a file');
    const fresh = path.join(workspaces, crypto.randomUUID());
    ensureWorkspaceDirs(fresh, owner);
    for (const p of [fresh, path.join(fresh, '.tmp'), path.join(fresh, 'outputs')]) {
      expect(fs.lstatSync(p).isDirectory()).toBe(true);
      expect(fs.lstatSync(p)).toMatchObject({ uid: owner.uid, gid: owner.gid });
    }
  });

  it('the control: a check and a chown by path (the name followed) under the same racer give the root-only directory to the tenant', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-prep-control'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.mkdirSync(path.join(ws, '.tmp'));
    const racer = await startRacer({ cwd: ws, owner, target, specs: ['d:.tmp'] });
    let taken = false;
    try {
      await repeatFor(2_000, 200, async () => {
        if (taken) return;
        const p = path.join(ws, '.tmp');
        const st = fs.lstatSync(p, { throwIfNoEntry: false });
        // The check by path, then the change by path: between the two the name may point elsewhere.
        if (st?.isDirectory()) fs.chownSync(p, owner.uid, owner.gid);
        taken = fs.statSync(target.dir).uid === owner.uid;
      });
    } finally {
      await racer.stop();
    }
    console.log(`prepare control: root-only directory given to the tenant: ${taken}`);
    expect(taken).toBe(true);
    fs.chownSync(target.dir, 0, 0);
  }, 60_000);
});

describe('the workspace marker under a racer (an earlier release’s in-tree .dify-workspace swapped for a link)', () => {
  it('never reads the root-only file swapped in for .dify-workspace (shaped like a marker): no identity of it in any outcome', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-marker'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    const id = { workspaceId: path.basename(ws), generation: 1 };
    fs.writeFileSync(path.join(ws, LEGACY_MARKER_FILE), JSON.stringify({ workspace_id: id.workspaceId, generation: 1 }));
    fs.chownSync(path.join(ws, LEGACY_MARKER_FILE), owner.uid, owner.gid);
    const racer = await startRacer({ cwd: ws, owner, target, specs: [`f:${LEGACY_MARKER_FILE}`] });
    const outcomes: string[] = [];
    let swaps = 0;
    try {
      await repeatFor(2_000, 200, async () => {
        try {
          outcomes.push(JSON.stringify(checkWorkspaceMarker(ws, id, true)));
        } catch (err) {
          outcomes.push((err as Error).message);
        }
        // Each round checks the in-tree marker again: the migrated one beside the workspaces is removed.
        removeMarker(ws);
      });
    } finally {
      swaps = await racer.stop();
    }
    console.log(`marker: ${outcomes.length} checks under ${swaps} swaps, ${new Set(outcomes).size} distinct outcomes`);
    expect(swaps).toBeGreaterThan(1000);
    expect(outcomes.filter((o) => o.includes(target.token))).toEqual([]);
    expect(fs.existsSync(markerPath(ws))).toBe(false);
    expect(leaks(path.join(workspaces, '.markers'), target.token)).toEqual([]);
    targetIntact(target);
  }, 60_000);

  it('the control: reading .dify-workspace by path under the same racer reads the root-only file', async () => {
    const target = rootOnlyTarget(path.join(base, 'target-marker-control'));
    const owner = tenantId();
    const ws = newWorkspace(owner);
    fs.writeFileSync(path.join(ws, LEGACY_MARKER_FILE), JSON.stringify({ workspace_id: 'x', generation: 1 }));
    const racer = await startRacer({ cwd: ws, owner, target, specs: [`f:${LEGACY_MARKER_FILE}`] });
    let hits = 0;
    try {
      await repeatFor(2_000, 50, async () => {
        const body = await fs.promises.readFile(path.join(ws, LEGACY_MARKER_FILE), 'utf8').catch(() => '');
        if (body.includes(target.token)) hits++;
      });
    } finally {
      await racer.stop();
    }
    console.log(`marker control: ${hits} reads of the root-only file`);
    expect(hits).toBeGreaterThan(0);
  }, 60_000);
});
