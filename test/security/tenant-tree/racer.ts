/**
 * The racer fixture of issue 45's tests: a root-only target (a 0700 directory holding 0600 files whose names and
 * contents carry a random token), a workspace owned by an unprivileged uid, and racer.c compiled here and run as that
 * uid with its cwd in the workspace (as the sandbox runs a command), swapping the workspace's entries with symlinks
 * to the target in a tight loop. `leaks` looks for the token anywhere under a tree (names and contents, nothing
 * followed: the file's own path carries none, so a link to it is the tenant's text, not a leak; the directory's other
 * entries carry it in their names, so a listing of it shows); `targetIntact` checks the target is as it was (nothing removed, written or given away).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';

const SOURCE = path.join(path.dirname(new URL(import.meta.url).pathname), 'racer.c');

/** Every test process compiles its own racer (cc, as a tenant builds it in the sandbox with the system's gcc). */
let compiled: string | null = null;
export function racerBinary(): string {
  if (compiled) return compiled;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'racer-'));
  fs.chmodSync(dir, 0o755);
  const bin = path.join(dir, 'racer');
  execFileSync('cc', ['-O2', '-Wall', '-o', bin, SOURCE], { stdio: 'pipe' });
  compiled = bin;
  return bin;
}

export interface Target {
  /** The 0700 root-owned directory. */
  dir: string;
  /** A 0600 root-owned file in it. */
  file: string;
  token: string;
  /** sha256 of every entry under dir, by relative path (names carry the token too). */
  before: Record<string, string>;
}

/** The root-only target under `base` (which must be traversable: its own mode is set to 0755). */
export function rootOnlyTarget(base: string): Target {
  expect(process.getuid?.(), 'the racer tests need root: a privileged process is what they attack').toBe(0);
  fs.mkdirSync(base, { recursive: true });
  fs.chmodSync(base, 0o755);
  const token = `SECRET-${crypto.randomBytes(16).toString('hex')}`;
  const dir = fs.mkdtempSync(path.join(base, 'root-only-'));
  fs.chmodSync(dir, 0o700);
  const file = path.join(dir, 'secrets.json'); // its path is what the tenant's links name: no token in it
  // JSON like DATA_DIR/secrets.json (and shaped like a workspace marker), 64 KiB so a partial read shows too.
  const body = JSON.stringify({ workspace_id: token, generation: 1, INNER_API_KEY: token, pad: token.repeat(1900) });
  fs.writeFileSync(file, body, { mode: 0o600 });
  fs.mkdirSync(path.join(dir, `deep-${token}`), { mode: 0o700 });
  fs.writeFileSync(path.join(dir, `deep-${token}`, `key-${token}`), `${token}\n`, { mode: 0o600 });
  return { dir, file, token, before: snapshot(dir) };
}

function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = path.join(e.parentPath, e.name);
    const st = fs.lstatSync(p);
    const what = st.isFile() ? crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex') : st.isDirectory() ? 'dir' : 'other';
    out[path.relative(dir, p)] = `${what} ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
  }
  const st = fs.lstatSync(dir);
  out['.'] = `dir ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
  return out;
}

/** The target is exactly as created: nothing removed, added, written, chowned or chmodded. */
export function targetIntact(t: Target): void {
  expect(snapshot(t.dir)).toEqual(t.before);
}

/** An unprivileged uid/gid for the tenant (in the sandbox's range, never a real user's). */
export function tenantId(): { uid: number; gid: number } {
  const uid = 200_000 + crypto.randomInt(90_000);
  return { uid, gid: uid };
}

/** A workspace directory owned by the tenant (0755, as the backend leaves one). */
export function tenantWorkspace(dir: string, owner: { uid: number; gid: number }): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.chownSync(dir, owner.uid, owner.gid);
  fs.chmodSync(dir, 0o755);
  return dir;
}

/**
 * Paths under `dir` that reveal the target: a name or a file's content holding the token, or a link's text holding it.
 * Walked with lstat only; files read as they are (no link followed).
 */
export function leaks(dir: string, token: string): string[] {
  const found: string[] = [];
  // By hand with lstat: readdir's `recursive` descends into symlinked directories (it would "find" the target itself).
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d)) {
      const p = path.join(d, name);
      if (name.includes(token)) found.push(p);
      const st = fs.lstatSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && fs.readFileSync(p).includes(token)) found.push(p);
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return found;
}

export interface Racer {
  child: ChildProcess;
  /** Stops it (SIGTERM) and returns how many swaps it made. */
  stop: () => Promise<number>;
}

/**
 * Starts the racer as `owner` in `cwd` swapping each spec (`f:name`, `d:name`) with a link to the target, for at most
 * `seconds`; resolves once its pairs exist ("ready").
 */
export async function startRacer(opts: {
  cwd: string;
  owner: { uid: number; gid: number };
  target: Target;
  specs: string[];
  seconds?: number;
}): Promise<Racer> {
  const child = spawn(racerBinary(), [String(opts.seconds ?? 120), opts.target.file, opts.target.dir, ...opts.specs], {
    cwd: opts.cwd,
    uid: opts.owner.uid,
    gid: opts.owner.gid,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const t = setInterval(() => {
      if (out.includes('ready')) {
        clearInterval(t);
        resolve();
      }
    }, 5);
    void exited.then((code) => {
      clearInterval(t);
      reject(new Error(`racer exited (${code}) before it was ready: ${err}`));
    });
  });
  return {
    child,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      const m = /swaps (\d+)/.exec(out);
      expect(m, `racer output: ${out} ${err}`).not.toBeNull();
      return Number(m![1]);
    },
  };
}

/** Runs `op` again and again for `ms` (at least `min` times) while a racer runs; returns how many times it ran. */
export async function repeatFor(ms: number, min: number, op: (i: number) => Promise<void>): Promise<number> {
  const until = Date.now() + ms;
  let i = 0;
  while (Date.now() < until || i < min) await op(i++);
  return i;
}
