/**
 * worker/workflow-bundle-cache.ts: the workers of a test run share one bundle of workflows/ (WORKER_WORKFLOW_BUNDLE_CACHE_DIR),
 * made again as soon as any file in it changes, so a worker never runs stale workflow code.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cachedWorkflowBundle } from '../../worker/workflow-bundle-cache.js';

// Inside the project, so the bundle's @temporalio/workflow resolves from its node_modules.
const SRC_ROOT = path.resolve(import.meta.dirname, '../../.cache');
fs.mkdirSync(SRC_ROOT, { recursive: true });
const made: string[] = [];
const tmp = (root: string, prefix: string) => {
  const d = fs.mkdtempSync(path.join(root, prefix));
  made.push(d);
  return d;
};
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

describe('the workflow bundle cache', () => {
  it('reuses the bundle while its inputs are unchanged and makes a fresh one after an edit of an imported file', async () => {
    const src = tmp(SRC_ROOT, 'wf-cache-src-');
    const dir = tmp(os.tmpdir(), 'wf-cache-');
    fs.writeFileSync(
      path.join(src, 'index.ts'),
      "import { word } from './dep.js';\nexport async function greet(): Promise<string> { return word; }\n",
    );
    fs.writeFileSync(path.join(src, 'dep.ts'), "export const word = 'first-version-of-dep';\n");
    const bundled: string[] = [];
    const bundle = () =>
      cachedWorkflowBundle({ dir, workflowsPath: path.join(src, 'index.ts'), workflowInterceptorModules: [], log: (m) => bundled.push(m) });

    const first = await bundle();
    expect(first.code).toContain('first-version-of-dep');
    expect(bundled).toHaveLength(1);

    const again = await bundle();
    expect(again.code).toBe(first.code);
    expect(bundled).toHaveLength(1);

    fs.writeFileSync(path.join(src, 'dep.ts'), "export const word = 'second-version-of-dep';\n");
    const edited = await bundle();
    expect(edited.code).toContain('second-version-of-dep');
    expect(edited.code).not.toContain('first-version-of-dep');
    expect(bundled).toHaveLength(2);

    // A missing bundle file (a cache dir pruned by hand) is made again, not an error.
    for (const f of fs.readdirSync(dir)) if (f.endsWith('.js')) fs.rmSync(path.join(dir, f));
    expect((await bundle()).code).toContain('second-version-of-dep');
    expect(bundled).toHaveLength(3);
  });

  it('keeps a bundle per set of interceptor modules', async () => {
    const src = tmp(SRC_ROOT, 'wf-cache-src-');
    const dir = tmp(os.tmpdir(), 'wf-cache-');
    fs.writeFileSync(path.join(src, 'index.ts'), "export async function greet(): Promise<string> { return 'hi'; }\n");
    fs.writeFileSync(
      path.join(src, 'interceptor.ts'),
      'export const interceptors = () => ({ inbound: [], outbound: [], internals: [] });\n// interceptor-marker\n',
    );
    const bundled: string[] = [];
    const bundle = (modules: string[]) =>
      cachedWorkflowBundle({
        dir,
        workflowsPath: path.join(src, 'index.ts'),
        workflowInterceptorModules: modules,
        log: (m) => bundled.push(m),
      });
    const plain = await bundle([]);
    const withInterceptor = await bundle([path.join(src, 'interceptor.ts')]);
    expect(plain.code).not.toContain('interceptor-marker');
    expect(withInterceptor.code).toContain('interceptor.ts');
    expect(bundled).toHaveLength(2);
    expect((await bundle([])).code).toBe(plain.code);
    expect(bundled).toHaveLength(2);
  });
});
