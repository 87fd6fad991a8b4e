/**
 * core/domain/workspace-fs.ts: placement into and reads out of a workspace never follow a link the agent planted, at any
 * level (issue 27 item 5). Plain directories in a temp dir; each case plants the attack and checks both the
 * refusal and that the directory outside stayed as it was. The race case swaps `uploads` for a symlink from a
 * worker thread while files are placed, a few hundred times.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listWorkspaceDir, placeWorkspaceFile, readWorkspaceFile, WorkspaceRefused } from '../../core/domain/workspace-fs.js';
import { placeTurnFiles } from '../../activities/prepare/workspace-files.js';
import { safeName } from '../../core/domain/uploads.js';

let base: string;
let ws: string;
let outside: string;
const MSG = '0b7c2a9e-4c1d-4f6e-9a52-0e5d3b1c7a10';

beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'ws-fs-'));
  ws = path.join(base, 'workspaces', 'ws1');
  outside = path.join(base, 'outside');
  fs.mkdirSync(ws, { recursive: true });
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

/** Everything under `outside`, with contents: must not change. */
const tree = (dir: string): Record<string, string> =>
  Object.fromEntries(
    fs
      .readdirSync(dir, { recursive: true, withFileTypes: true })
      .map((e) => path.join(e.parentPath, e.name))
      .sort()
      .map((p) => [
        path.relative(dir, p),
        fs.lstatSync(p).isFile() ? fs.readFileSync(p, 'utf8') : fs.lstatSync(p).isDirectory() ? '<dir>' : '<other>',
      ]),
  );

describe('placing a file into the workspace', () => {
  it('names files safely inside the workspace', () => {
    expect(safeName('../../etc/passwd', 'f')).toBe('passwd');
    expect(safeName('.hidden', 'f')).toBe('hidden');
    expect(safeName('/', 'file-1')).toBe('file-1');
    expect(safeName('report (final).pdf', 'f')).toBe('report _final_.pdf');
  });

  it('creates uploads/<msg>/<name> and a retry writes the same path', async () => {
    expect(await placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('one'))).toBe(`uploads/${MSG}/a.txt`);
    expect(await placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('two'))).toBe(`uploads/${MSG}/a.txt`);
    expect(fs.readFileSync(path.join(ws, 'uploads', MSG, 'a.txt'), 'utf8')).toBe('two');
    expect(fs.readdirSync(path.join(ws, 'uploads', MSG))).toEqual(['a.txt']); // no temp file left
  });

  it.runIf(process.getuid?.() === 0)('what it creates belongs to the given owner (the workspace’s sandbox uid)', async () => {
    await placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('x'), { owner: { uid: 212_345, gid: 212_345 } });
    for (const p of ['uploads', `uploads/${MSG}`, `uploads/${MSG}/a.txt`]) {
      const st = fs.lstatSync(path.join(ws, p));
      expect([st.uid, st.gid], p).toEqual([212_345, 212_345]);
    }
    expect(fs.lstatSync(ws).uid).toBe(0); // the root itself is not the api's to change
  });

  it('creates the workspace directory when it does not exist yet (a first turn)', async () => {
    const fresh = path.join(base, 'workspaces', 'ws2');
    await placeWorkspaceFile(fresh, ['uploads', MSG], 'a.txt', Buffer.from('x'));
    expect(fs.readFileSync(path.join(fresh, 'uploads', MSG, 'a.txt'), 'utf8')).toBe('x');
  });

  it('refuses when uploads/ is a symlink out of the workspace; nothing lands outside', async () => {
    fs.symlinkSync(outside, path.join(ws, 'uploads'));
    const before = tree(outside);
    await expect(placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('x'))).rejects.toThrow(
      new WorkspaceRefused('uploads/ in the workspace is a symbolic link'),
    );
    expect(tree(outside)).toEqual(before);
  });

  it('refuses when uploads/<msg>/ is a symlink (also a relative one)', async () => {
    fs.mkdirSync(path.join(ws, 'uploads'));
    fs.symlinkSync('../../../outside', path.join(ws, 'uploads', MSG));
    const before = tree(outside);
    await expect(placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('x'))).rejects.toThrow(
      `uploads/${MSG}/ in the workspace is a symbolic link`,
    );
    expect(tree(outside)).toEqual(before);
  });

  it('refuses when uploads is a file, and when the workspace itself is a symlink', async () => {
    fs.writeFileSync(path.join(ws, 'uploads'), 'not a dir');
    await expect(placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('x'))).rejects.toThrow(
      'uploads/ in the workspace is not a directory',
    );
    const linked = path.join(base, 'workspaces', 'linked');
    fs.symlinkSync(outside, linked);
    await expect(placeWorkspaceFile(linked, ['uploads', MSG], 'a.txt', Buffer.from('x'))).rejects.toThrow(
      'the workspace is a symbolic link',
    );
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
  });

  it('a symlink planted at the file name is replaced, never written through', async () => {
    fs.mkdirSync(path.join(ws, 'uploads', MSG), { recursive: true });
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'uploads', MSG, 'a.txt'));
    await placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('placed'));
    expect(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');
    const st = fs.lstatSync(path.join(ws, 'uploads', MSG, 'a.txt'));
    expect(st.isFile()).toBe(true);
    expect(fs.readFileSync(path.join(ws, 'uploads', MSG, 'a.txt'), 'utf8')).toBe('placed');
  });

  it('a hard link planted at the file name is replaced, the other name keeps its content', async () => {
    fs.mkdirSync(path.join(ws, 'uploads', MSG), { recursive: true });
    fs.linkSync(path.join(outside, 'secret.txt'), path.join(ws, 'uploads', MSG, 'a.txt'));
    await placeWorkspaceFile(ws, ['uploads', MSG], 'a.txt', Buffer.from('placed'));
    expect(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');
    expect(fs.lstatSync(path.join(ws, 'uploads', MSG, 'a.txt')).nlink).toBe(1);
  });

  it('refuses names with separators or dots', async () => {
    await expect(placeWorkspaceFile(ws, ['uploads', MSG], '../x', Buffer.from('x'))).rejects.toThrow(WorkspaceRefused);
    await expect(placeWorkspaceFile(ws, ['uploads', '..'], 'x', Buffer.from('x'))).rejects.toThrow(WorkspaceRefused);
    await expect(placeWorkspaceFile(ws, ['uploads', MSG], '.hidden', Buffer.from('x'))).rejects.toThrow(WorkspaceRefused);
  });

  it('placeTurnFiles turns a refusal into the file error the prompt shows', async () => {
    fs.symlinkSync(outside, path.join(ws, 'uploads'));
    const upload = { id: 'u1', name: 'report.txt', storage_key: 't/u1.txt' };
    const dataDir = path.join(base, 'data');
    fs.mkdirSync(path.join(dataDir, 'uploads', 't'), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'uploads', 't', 'u1.txt'), 'numbers');
    const db = { uploadFile: { findUnique: async () => upload } } as never;
    const placed = await placeTurnFiles(
      { db, config: { dataDir } as never },
      { workspaceDir: ws, messageId: MSG, files: [{ type: 'document', transfer_method: 'local_file', url: null, upload_file_id: 'u1' }] },
    );
    expect(placed).toEqual([
      { name: 'report.txt', path: null, error: 'uploads/ in the workspace is a symbolic link; the file was not placed' },
    ]);
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
  });

  it('a race that swaps uploads/ for a symlink while files are placed never writes outside (400+ placements)', async () => {
    fs.mkdirSync(path.join(ws, 'uploads'));
    // [0]: stop flag, [1]: times uploads/ was a symlink. The swapper holds each state ~1 ms, so placements meet the
    // symlink, the gap and the restore; it recovers when a placement re-created uploads/ in the gap (otherwise it
    // would stick with uploads.real beside a new uploads/ and the race would stop, which is how CI once saw 0 hits).
    // The placements start once the swapper runs, and go on (bounded) until the race has hit at least once.
    const shared = new Int32Array(new SharedArrayBuffer(12));
    const swapper = new Worker(
      `const fs = require('node:fs'); const { workerData: w } = require('node:worker_threads');
       const flag = new Int32Array(w.shared);
       const real = w.uploads + '.real';
       const dwell = () => Atomics.wait(flag, 2, 0, 1);
       while (Atomics.load(flag, 0) === 0) {
         try { fs.renameSync(w.uploads, real); } catch {}
         try { fs.symlinkSync(w.outside, w.uploads); Atomics.add(flag, 1, 1); } catch {}
         dwell();
         try { if (fs.lstatSync(w.uploads).isSymbolicLink()) fs.unlinkSync(w.uploads); } catch {}
         try { fs.renameSync(real, w.uploads); } catch { try { fs.rmSync(real, { recursive: true, force: true }); } catch {} }
         dwell();
       }
       require('node:worker_threads').parentPort.postMessage(Atomics.load(flag, 1));`,
      { eval: true, workerData: { shared: shared.buffer, uploads: path.join(ws, 'uploads'), outside } },
    );
    const swaps = new Promise<number>((resolve) => swapper.once('message', resolve));
    const started = Date.now();
    while (Atomics.load(shared, 1) < 10 && Date.now() - started < 20_000) await new Promise((r) => setTimeout(r, 5));
    let placed = 0;
    let refused = 0;
    for (let i = 0; i < 20_000 && (i < 400 || refused === 0 || placed === 0 || Atomics.load(shared, 1) < 100); i++) {
      try {
        await placeWorkspaceFile(ws, ['uploads', `m${i % 7}`], `f${i}.txt`, Buffer.from(`${i}`));
        placed++;
      } catch (err) {
        // A swap mid-walk: refused (ELOOP/ENOENT), never a write through the link.
        if (!(err instanceof WorkspaceRefused) && (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        refused++;
      }
    }
    Atomics.store(shared, 0, 1);
    expect(await swaps).toBeGreaterThanOrEqual(100);
    await swapper.terminate();
    expect(fs.readdirSync(outside)).toEqual(['secret.txt']);
    expect(placed + refused).toBeGreaterThanOrEqual(400);
    expect(refused).toBeGreaterThan(0); // the race did hit
    expect(placed).toBeGreaterThan(0);
  }, 60_000);
});

describe('reading a file out of the workspace', () => {
  beforeEach(() => {
    fs.mkdirSync(path.join(ws, 'outputs'));
    fs.writeFileSync(path.join(ws, 'outputs', 'ok.txt'), 'fine');
  });

  it('reads a regular file', async () => {
    expect((await readWorkspaceFile(ws, ['outputs'], 'ok.txt', 100)).toString()).toBe('fine');
  });

  it('refuses outputs/ as a symlink, a symlinked file, a FIFO, a hard link, a directory and a file over the cap', async () => {
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'outputs', 'link.txt'));
    execFileSync('mkfifo', [path.join(ws, 'outputs', 'fifo')]);
    fs.linkSync(path.join(outside, 'secret.txt'), path.join(ws, 'outputs', 'hard.txt'));
    fs.mkdirSync(path.join(ws, 'outputs', 'dir'));
    fs.writeFileSync(path.join(ws, 'outputs', 'big.bin'), Buffer.alloc(101));
    await expect(readWorkspaceFile(ws, ['outputs'], 'link.txt', 100)).rejects.toThrow(new WorkspaceRefused('a symbolic link'));
    await expect(readWorkspaceFile(ws, ['outputs'], 'fifo', 100)).rejects.toThrow(new WorkspaceRefused('not a regular file'));
    await expect(readWorkspaceFile(ws, ['outputs'], 'hard.txt', 100)).rejects.toThrow(new WorkspaceRefused('a hard link'));
    await expect(readWorkspaceFile(ws, ['outputs'], 'dir', 100)).rejects.toThrow(new WorkspaceRefused('not a regular file'));
    await expect(readWorkspaceFile(ws, ['outputs'], 'big.bin', 100)).rejects.toThrow(new WorkspaceRefused('larger than 100 bytes'));
    fs.rmSync(path.join(ws, 'outputs'), { recursive: true });
    fs.symlinkSync(outside, path.join(ws, 'outputs'));
    await expect(readWorkspaceFile(ws, ['outputs'], 'secret.txt', 100)).rejects.toThrow(
      new WorkspaceRefused('outputs/ in the workspace is a symbolic link'),
    );
    expect(await listWorkspaceDir(ws, ['outputs'])).toEqual(new Map());
  });

  it('a race that swaps outputs/ for a symlink to a directory with the same name never reads it (400 reads)', async () => {
    fs.writeFileSync(path.join(outside, 'ok.txt'), 'OUTSIDE');
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const swapper = new Worker(
      `const fs = require('node:fs'); const { workerData: w } = require('node:worker_threads');
       const flag = new Int32Array(w.stop);
       while (Atomics.load(flag, 0) === 0) {
         try { fs.renameSync(w.dir, w.dir + '.real'); fs.symlinkSync(w.outside, w.dir); } catch {}
         try { fs.unlinkSync(w.dir); fs.renameSync(w.dir + '.real', w.dir); } catch {}
       }
       require('node:worker_threads').parentPort.postMessage('done');`,
      { eval: true, workerData: { stop: stop.buffer, dir: path.join(ws, 'outputs'), outside } },
    );
    const done = new Promise((resolve) => swapper.once('message', resolve));
    const seen = new Set<string>();
    for (let i = 0; i < 400; i++) {
      try {
        seen.add((await readWorkspaceFile(ws, ['outputs'], 'ok.txt', 100)).toString());
      } catch (err) {
        if (!(err instanceof WorkspaceRefused)) throw err;
        seen.add('refused');
      }
    }
    Atomics.store(stop, 0, 1);
    await done;
    await swapper.terminate();
    expect(seen.has('OUTSIDE')).toBe(false);
    expect(seen.has('fine')).toBe(true);
  }, 60_000);
});
