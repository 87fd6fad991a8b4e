/**
 * scripts/build-web.ts decides "built or not" by a hash of its inputs (the stamp in the output dir), not by mtimes:
 * a copy of web/ is built for real (Vite), then an edit whose mtime is older than the last build, a new file and a
 * removed one each rebuild, an unchanged tree does not, and the inputs include the script itself and the vendor
 * modules the sources import (marked, DOMPurify). The copy sits under .cache so its bare imports resolve from the
 * project's node_modules.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureWebBuild, webBuildInputs, webBuildIsCurrent, webInputsHash } from '../../scripts/build-web.js';
import { projectRoot } from '../../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);
const work = path.join(ROOT, '.cache', `build-web-test-${process.pid}`);
const src = path.join(work, 'web');
const out = path.join(work, 'out');
const stamp = () => fs.readFileSync(path.join(out, '.build-stamp'), 'utf8').trim();
/** An hour before now: older than any build this test makes, so an mtime comparison would call the build current. */
const past = () => new Date(Date.now() - 3_600_000);

describe('the web build is redone exactly when an input changed', () => {
  beforeAll(() => {
    fs.rmSync(work, { recursive: true, force: true });
    fs.cpSync(path.join(ROOT, 'web'), src, { recursive: true });
  });
  afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

  it('lists every source, the script and the vendor modules the sources import as inputs', () => {
    const inputs = webBuildInputs(src).map((f) => path.relative(ROOT, f));
    expect(inputs).toContain(path.relative(ROOT, path.join(src, 'index.html')));
    expect(inputs).toContain(path.relative(ROOT, path.join(src, 'lib', 'markdown.js')));
    expect(inputs).toContain(path.relative(ROOT, fileURLToPath(new URL('../../scripts/build-web.ts', import.meta.url))));
    for (const vendor of ['marked', 'dompurify', 'vite']) expect(inputs).toContain(path.join('node_modules', vendor, 'package.json'));
  });

  it('builds, skips an unchanged tree, and rebuilds on an edit with an old mtime, a new file and a removed one', async () => {
    expect(await ensureWebBuild(out, false, src)).toBe(true);
    expect(stamp()).toBe(webInputsHash(src));
    expect(webBuildIsCurrent(out, src)).toBe(true);
    expect(await ensureWebBuild(out, false, src)).toBe(false);

    // An edit whose mtime is older than the build (a checkout or copy that keeps mtimes): still a rebuild.
    const index = path.join(src, 'index.html');
    fs.writeFileSync(index, fs.readFileSync(index, 'utf8').replace('<title>Agent chat</title>', '<title>Agent chat, edited</title>'));
    fs.utimesSync(index, past(), past());
    expect(webBuildIsCurrent(out, src)).toBe(false);
    expect(await ensureWebBuild(out, false, src)).toBe(true);
    expect(fs.readFileSync(path.join(out, 'index.html'), 'utf8')).toContain('<title>Agent chat, edited</title>');
    expect(await ensureWebBuild(out, false, src)).toBe(false);

    // A new file (a public asset), then its removal.
    const extra = path.join(src, 'public', 'robots.txt');
    fs.writeFileSync(extra, 'User-agent: *\n');
    fs.utimesSync(extra, past(), past());
    expect(await ensureWebBuild(out, false, src)).toBe(true);
    expect(fs.existsSync(path.join(out, 'robots.txt'))).toBe(true);
    fs.rmSync(extra);
    expect(await ensureWebBuild(out, false, src)).toBe(true);
    expect(fs.existsSync(path.join(out, 'robots.txt'))).toBe(false);

    // --force builds whatever the stamp says.
    expect(await ensureWebBuild(out, true, src)).toBe(true);
  }, 120_000);
});
