/**
 * The pages' static assets (issue 34): web/index.html (the chat page) and web/studio.html (the studio) with their
 * modules and npm dependencies (marked, DOMPurify) bundled by Vite into hashed files under one directory, which the
 * api serves at /chat/ and /studio/ with the strict CSP (api/app.ts): external module scripts and stylesheets only —
 * Vite emits no inline script, and nothing in the pages uses eval.
 *
 * `webBuildDir()` is where the api reads them: .cache/web when the api runs from TypeScript (npm start, tests),
 * <dist>/web when it runs compiled (scripts/build.ts writes it there). `ensureWebBuild()` builds only when a source
 * under web/ (or this file, or package-lock.json) is newer than the last build; it builds into a temporary directory
 * and swaps it in, so a concurrent test run serving the old build never sees half a build.
 *
 * CLI: `tsx scripts/build-web.ts [--out-dir DIR] [--force]` (prestart, pretest; scripts/build.ts calls buildWeb).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { projectRoot } from '../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const SRC = path.join(ROOT, 'web');
const DEFAULT_OUT = path.join(ROOT, '.cache', 'web');
const STAMP = '.build-stamp';

/** The newest modification time among the build's inputs. */
function newestInput(): number {
  let newest = 0;
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  walk(SRC);
  for (const f of [fileURLToPath(import.meta.url), path.join(ROOT, 'package-lock.json')]) newest = Math.max(newest, fs.statSync(f).mtimeMs);
  return newest;
}

/** Builds the pages into `outDir` (replaced whole). Returns the bytes written. */
export async function buildWeb(outDir: string = DEFAULT_OUT): Promise<number> {
  const { build } = await import('vite');
  const tmp = `${outDir}.tmp-${process.pid}-${Date.now()}`;
  await build({
    root: SRC,
    // Relative asset URLs: the same files serve /chat/ and /studio/.
    base: './',
    configFile: false,
    logLevel: 'warn',
    publicDir: path.join(SRC, 'public'),
    build: {
      outDir: tmp,
      emptyOutDir: true,
      // The pages' own budget; marked + DOMPurify are most of it.
      chunkSizeWarningLimit: 400,
      // No inline <script> for the module preload helper (the CSP allows only 'self' scripts).
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      target: 'es2022',
      rollupOptions: { input: { chat: path.join(SRC, 'index.html'), studio: path.join(SRC, 'studio.html') } },
    },
  });
  fs.writeFileSync(path.join(tmp, STAMP), String(Date.now()));
  const old = `${outDir}.old-${process.pid}-${Date.now()}`;
  if (fs.existsSync(outDir)) fs.renameSync(outDir, old);
  fs.renameSync(tmp, outDir);
  fs.rmSync(old, { recursive: true, force: true });
  let bytes = 0;
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }))
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else bytes += fs.statSync(path.join(dir, e.name)).size;
  };
  walk(outDir);
  return bytes;
}

/** Builds when the last build is missing or older than its inputs; true when it built. */
export async function ensureWebBuild(outDir: string = DEFAULT_OUT, force = false): Promise<boolean> {
  const stamp = path.join(outDir, STAMP);
  if (!force && fs.existsSync(stamp) && Number(fs.readFileSync(stamp, 'utf8')) >= newestInput()) return false;
  await buildWeb(outDir);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { 'out-dir': { type: 'string' }, force: { type: 'boolean' } } });
  const started = Date.now();
  const out = path.resolve(values['out-dir'] ?? DEFAULT_OUT);
  const built = await ensureWebBuild(out, values.force);
  console.log(
    built
      ? `built web pages into ${path.relative(ROOT, out)}/ in ${Date.now() - started} ms`
      : `web pages up to date (${path.relative(ROOT, out)}/)`,
  );
}
