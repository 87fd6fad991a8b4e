/**
 * The pages' static assets (issue 34): web/index.html (the chat page) and web/studio.html (the studio) with their
 * modules and npm dependencies (marked, DOMPurify; highlight.js in a chunk of its own, web/lib/highlight.js, that
 * the pages import only once an answer has a code block) bundled by Vite into hashed files under one directory, which the
 * api serves at /chat/ and /studio/ with the strict CSP (api/app.ts): external module scripts and stylesheets only —
 * Vite emits no inline script, and nothing in the pages uses eval.
 *
 * `webBuildDir()` is where the api reads them: .cache/web when the api runs from TypeScript (npm start, tests),
 * <dist>/web when it runs compiled (scripts/build.ts writes it there). `ensureWebBuild()` builds only when an input
 * changed since the last build: a sha256 of every file under web/, this script and the package.json of each npm
 * module the sources import (and Vite's) is the build's stamp (.build-stamp in the output), so an edit, a new or
 * removed file, a checkout that keeps old mtimes or a new vendor version all rebuild, and nothing else does. It builds
 * into a temporary directory and swaps it in, so a concurrent test run serving the old build never sees half a build.
 *
 * CLI: `tsx scripts/build-web.ts [--out-dir DIR] [--force]` (prestart, pretest; scripts/build.ts calls buildWeb).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { projectRoot } from '../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const SRC = path.join(ROOT, 'web');
const DEFAULT_OUT = path.join(ROOT, '.cache', 'web');
const STAMP = '.build-stamp';

/** The files a build reads: every file under `src`, this script, and the package.json of each npm module the
 * sources import (their vendor libs, e.g. marked and DOMPurify: a new version there changes the bundle) and of Vite. */
export function webBuildInputs(src: string = SRC): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) files.push(p);
    }
  };
  walk(src);
  const modules = new Set(['vite']);
  for (const f of files)
    if (/\.(m?js|ts|html)$/.test(f))
      for (const m of fs.readFileSync(f, 'utf8').matchAll(/\bfrom\s+['"]([^'"./][^'"]*)['"]|\bimport\s*\(?\s*['"]([^'"./][^'"]*)['"]/g)) {
        const spec = m[1] ?? m[2]!;
        modules.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
  const vendor = [...modules].sort().map((m) => path.join(ROOT, 'node_modules', m, 'package.json'));
  return [...files, fileURLToPath(import.meta.url), ...vendor];
}

/** A sha256 over the inputs' paths (relative to the project) and contents; a missing input counts as its absence. */
export function webInputsHash(src: string = SRC): string {
  const h = createHash('sha256');
  for (const f of webBuildInputs(src)) {
    h.update(`${path.relative(ROOT, f)}\0`);
    h.update(fs.existsSync(f) ? fs.readFileSync(f) : '(missing)');
    h.update('\0');
  }
  return h.digest('hex');
}

/** Builds the pages into `outDir` (replaced whole). Returns the bytes written. */
export async function buildWeb(outDir: string = DEFAULT_OUT, src: string = SRC): Promise<number> {
  const { build } = await import('vite');
  // Hashed before the build reads them: a source edited while it runs makes the next ensureWebBuild build again.
  const inputs = webInputsHash(src);
  const tmp = `${outDir}.tmp-${process.pid}-${Date.now()}`;
  await build({
    root: src,
    // Relative asset URLs: the same files serve /chat/ and /studio/.
    base: './',
    configFile: false,
    logLevel: 'warn',
    publicDir: path.join(src, 'public'),
    build: {
      outDir: tmp,
      emptyOutDir: true,
      // The pages' own budget; marked + DOMPurify are most of it.
      chunkSizeWarningLimit: 400,
      // No inline <script> for the module preload helper (the CSP allows only 'self' scripts).
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      target: 'es2022',
      rollupOptions: { input: { chat: path.join(src, 'index.html'), studio: path.join(src, 'studio.html') } },
    },
  });
  fs.writeFileSync(path.join(tmp, STAMP), `${inputs}\n`);
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

/** Whether `outDir` holds a build of exactly the current inputs (its stamp is their hash). */
export function webBuildIsCurrent(outDir: string = DEFAULT_OUT, src: string = SRC): boolean {
  const stamp = path.join(outDir, STAMP);
  return fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8').trim() === webInputsHash(src);
}

/** Builds when the last build is missing or was built from other inputs (any file changed, added or removed); true when it built. */
export async function ensureWebBuild(outDir: string = DEFAULT_OUT, force = false, src: string = SRC): Promise<boolean> {
  if (!force && webBuildIsCurrent(outDir, src)) return false;
  await buildWeb(outDir, src);
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
