/**
 * `npm run build`: the production build into dist/ — the TypeScript of the runnable entry points compiled by
 * tsc (tsconfig.build.json: api, worker, agent backend, admin CLI, migrate), then the workflow code bundled once
 * from the compiled workflows/ into dist/workflow-bundle.js (and its variants without the interceptors of metrics
 * and tracing, worker/telemetry.ts PREBUILT_BUNDLES), which a compiled worker loads instead of bundling at start.
 * Why tsc and not a bundler: the output keeps the source layout module for module, so stack traces, source maps and the project-root lookups (core/platform/project-root.ts) work unchanged, and the Prisma client
 * and the Temporal native bridge stay ordinary node_modules imports. The pages (web/) are built by Vite into
 * <dist>/web (scripts/build-web.ts), where the compiled api serves them from.
 *
 * Options: `--out-dir DIR` (default dist/; must be inside the project so node_modules and package.json are found
 * above it) and `--no-check` (emit without type checking — `npm run typecheck` is the check; the compiled-entry
 * test uses it to stay fast; the emitted JavaScript is the same, tsconfig has isolatedModules).
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../core/platform/project-root.js';
import { buildWeb } from './build-web.js';
import { PREBUILT_BUNDLES } from '../worker/telemetry.js';

const ROOT = projectRoot(import.meta.url);
const { values: args } = parseArgs({ options: { 'out-dir': { type: 'string' }, 'no-check': { type: 'boolean' } } });
const DIST = path.resolve(args['out-dir'] ?? path.join(ROOT, 'dist'));
if (!DIST.startsWith(ROOT + path.sep))
  throw new Error(`--out-dir must be inside ${ROOT} (node_modules and package.json are found above it)`);

function compile(): void {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const flags = ['-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', DIST, ...(args['no-check'] ? ['--noCheck'] : [])];
  const r = spawnSync(process.execPath, [tsc, ...flags], { stdio: 'inherit', cwd: ROOT });
  if (r.status !== 0) throw new Error(`tsc failed (exit ${r.status ?? r.signal})`);
}

/** One bundle per set of workflow interceptor modules (worker/telemetry.ts PREBUILT_BUNDLES); returns the largest's size. */
async function bundleWorkflows(): Promise<number> {
  const quiet = () => undefined;
  let largest = 0;
  for (const b of Object.values(PREBUILT_BUNDLES)) {
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(DIST, 'workflows', 'index.js'),
      // Turn metrics and workflow spans (worker/telemetry.ts): a compiled worker loads the bundle of what is on.
      workflowInterceptorModules: [
        ...(b.metrics ? [path.join(DIST, 'workflows', 'interceptors.js')] : []),
        ...(b.tracing ? [createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')] : []),
      ],
      logger: { log: quiet, info: quiet, warn: console.warn, error: console.error, debug: quiet, trace: quiet } as never,
    });
    fs.writeFileSync(path.join(DIST, b.file), code);
    largest = Math.max(largest, code.length);
  }
  return largest;
}

const started = Date.now();
fs.rmSync(DIST, { recursive: true, force: true });
compile();
const bytes = await bundleWorkflows();
// The chat page and the studio (scripts/build-web.ts): the compiled api serves <dist>/web.
const webBytes = await buildWeb(path.join(DIST, 'web'));
console.log(
  `built ${path.relative(ROOT, DIST)}/ in ${((Date.now() - started) / 1000).toFixed(1)} s (workflow bundle ${(bytes / 1024).toFixed(0)} KiB, web pages ${(webBytes / 1024).toFixed(0)} KiB)`,
);
