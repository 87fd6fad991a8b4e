/**
 * Builds what the agent's shell needs, into `.cache/sandbox/` (rebuilt only when its sources change):
 *   - `shellctl`: the Landlock helper (Go, `sandbox/shellctl`), `go build` with the module proxy;
 *   - `bin/dify-agent` (+ `dify-agent.mjs`): the `dify-agent` CLI bundled into one plain JS file, so it
 *     runs with `node` alone inside the sandbox (no tsx, no node_modules, no repo access).
 * Run by the agent backend at start-up and by `npx tsx sandbox/build.ts` (CI, setup).
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../core/platform/config.js';
import { projectRoot } from '../core/platform/project-root.js';

const run = promisify(execFile);
const ROOT = projectRoot(import.meta.url);
export const SANDBOX_SRC = path.join(ROOT, 'sandbox');
export const DEFAULT_CACHE_DIR = path.join(ROOT, '.cache', 'sandbox');

export interface SandboxTools {
  shellctl: string;
  /** Directory with the `dify-agent` command; put on PATH (and made readable) inside the sandbox. */
  binDir: string;
}

export interface BuildOptions {
  cacheDir?: string;
  /** A prebuilt shellctl (SHELLCTL_PATH): used as is. */
  shellctlPath?: string;
  goBin?: string;
  log?: (msg: string) => void;
}

export class SandboxBuildError extends Error {}

function hashFiles(files: string[], extra = ''): string {
  const h = crypto.createHash('sha256').update(extra);
  for (const f of files.sort()) h.update(f).update('\0').update(fs.readFileSync(f)).update('\0');
  return h.digest('hex');
}

function upToDate(target: string, stamp: string, hash: string): boolean {
  try {
    return fs.existsSync(target) && fs.readFileSync(stamp, 'utf8').trim() === hash;
  } catch {
    return false;
  }
}

async function locateGo(explicit?: string): Promise<string> {
  const candidates = [explicit, 'go', '/usr/local/go/bin/go'].filter((c): c is string => Boolean(c));
  for (const c of candidates) {
    try {
      await run(c, ['version'], { timeout: 30_000 });
      return c;
    } catch {
      // next
    }
  }
  throw new SandboxBuildError(
    'shellctl (the agent shell helper) must be built with Go >= 1.24 and no Go toolchain was found ' +
      '(tried GO_BIN, `go` on PATH, /usr/local/go/bin/go). Install Go, or set SHELLCTL_PATH to a prebuilt shellctl.',
  );
}

export async function ensureShellctl(opts: BuildOptions = {}): Promise<string> {
  if (opts.shellctlPath) {
    if (!fs.existsSync(opts.shellctlPath)) throw new SandboxBuildError(`SHELLCTL_PATH ${opts.shellctlPath} does not exist`);
    return opts.shellctlPath;
  }
  const cacheDir = opts.cacheDir ?? DEFAULT_CACHE_DIR;
  const target = path.join(cacheDir, 'shellctl');
  const stamp = `${target}.sha256`;
  const srcDir = path.join(SANDBOX_SRC, 'shellctl');
  const sources = [
    path.join(SANDBOX_SRC, 'go.mod'),
    path.join(SANDBOX_SRC, 'go.sum'),
    ...fs
      .readdirSync(srcDir)
      .filter((f) => f.endsWith('.go') && !f.endsWith('_test.go'))
      .map((f) => path.join(srcDir, f)),
  ];
  const hash = hashFiles(sources);
  if (upToDate(target, stamp, hash)) return target;
  const go = await locateGo(opts.goBin);
  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${target}.${process.pid}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  opts.log?.(`building shellctl (${go} build) into ${target}`);
  try {
    await run(go, ['build', '-trimpath', '-o', tmp, './shellctl'], {
      cwd: SANDBOX_SRC,
      env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false' },
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    const e = err as { stderr?: string; message: string };
    throw new SandboxBuildError(`building shellctl failed: ${(e.stderr || e.message).trim().slice(0, 2000)}`);
  }
  fs.renameSync(tmp, target); // atomic: concurrent builders each rename a complete binary
  fs.writeFileSync(stamp, hash);
  return target;
}

export async function ensureCliBundle(opts: BuildOptions = {}): Promise<string> {
  const cacheDir = opts.cacheDir ?? DEFAULT_CACHE_DIR;
  const binDir = path.join(cacheDir, 'bin');
  const bundle = path.join(binDir, 'dify-agent.mjs');
  const wrapper = path.join(binDir, 'dify-agent');
  const stamp = `${bundle}.sha256`;
  const entry = path.join(ROOT, 'cli', 'dify-agent.ts');
  const hash = hashFiles([entry], process.execPath);
  if (upToDate(bundle, stamp, hash) && fs.existsSync(wrapper)) return binDir;
  fs.mkdirSync(binDir, { recursive: true });
  const esbuild = await import('esbuild');
  const tmp = `${bundle}.${process.pid}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24', // the wrapper below runs it with this very node (package.json pins Node 24)
    outfile: tmp,
    logLevel: 'silent',
  });
  fs.renameSync(tmp, bundle);
  // The node binary by absolute path: PATH inside the sandbox is minimal.
  const wrapperTmp = `${wrapper}.${process.pid}.tmp`;
  fs.writeFileSync(wrapperTmp, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} "$(dirname "$0")/dify-agent.mjs" "$@"\n`, {
    mode: 0o755,
  });
  fs.renameSync(wrapperTmp, wrapper);
  fs.writeFileSync(stamp, hash);
  opts.log?.(`bundled the dify-agent CLI into ${bundle}`);
  return binDir;
}

export async function ensureSandboxTools(opts: BuildOptions = {}): Promise<SandboxTools> {
  const [shellctl, binDir] = await Promise.all([ensureShellctl(opts), ensureCliBundle(opts)]);
  return { shellctl, binDir };
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href;
if (invokedDirectly) {
  const config = loadConfig();
  ensureSandboxTools({ shellctlPath: config.SHELLCTL_PATH, goBin: config.GO_BIN, log: (m) => console.log(m) }).then(
    (t) => console.log(`shellctl: ${t.shellctl}\ndify-agent: ${path.join(t.binDir, 'dify-agent')}`),
    (err) => {
      console.error((err as Error).message);
      process.exit(1);
    },
  );
}
