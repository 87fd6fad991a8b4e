/**
 * The webpack bundle of workflows/ kept on disk between processes (WORKER_WORKFLOW_BUNDLE_CACHE_DIR, from sources only).
 * A worker started from sources bundles workflows/ itself (3-4 s of CPU each time); the test suite starts a hundred and
 * more of them, in-process and as child processes, from the same code. Here the bundle is made once and reused while
 * every file webpack read for it (workflows/, what they import, the SDK's own modules) has the content it had then:
 * the manifest lists each input with its sha256, so an edit anywhere in what the bundle holds makes a fresh one. The
 * result is the bundle bundleWorkflowCode makes from the same options, as a worker given `workflowsPath` would make it.
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const SDK_VERSION = (createRequire(import.meta.url)('@temporalio/worker/package.json') as { version: string }).version;

interface Manifest {
  /** Absolute path -> sha256 of every file the bundle was made from. */
  inputs: Record<string, string>;
  /** The bundle's file name, beside the manifest. */
  bundle: string;
}

const sha256 = (data: string | Buffer) => crypto.createHash('sha256').update(data).digest('hex');

function fileHash(file: string): string | null {
  try {
    return sha256(fs.readFileSync(file));
  } catch {
    return null;
  }
}

function writeAtomically(file: string, data: string): void {
  const tmp = `${file}.${process.pid}-${crypto.randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, data);
  fs.renameSync(tmp, file);
}

/** The cached bundle when each of its inputs is unchanged, else null. */
function readCached(manifestFile: string, dir: string): string | null {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as Manifest;
  } catch {
    return null;
  }
  for (const [file, hash] of Object.entries(manifest.inputs)) if (fileHash(file) !== hash) return null;
  try {
    return fs.readFileSync(path.join(dir, manifest.bundle), 'utf8');
  } catch {
    return null;
  }
}

const quiet = () => undefined;

/**
 * The bundle of `workflowsPath` with `workflowInterceptorModules`, from `dir` when its inputs are unchanged, else made
 * now (and stored). Two processes making it at once both store a whole one (written aside, then renamed).
 */
export async function cachedWorkflowBundle(opts: {
  dir: string;
  workflowsPath: string;
  workflowInterceptorModules: string[];
  log?: (message: string) => void;
}): Promise<{ code: string }> {
  const dir = path.resolve(opts.dir);
  const key = sha256(
    JSON.stringify({ sdk: SDK_VERSION, workflowsPath: opts.workflowsPath, modules: opts.workflowInterceptorModules }),
  ).slice(0, 16);
  const manifestFile = path.join(dir, `${key}.json`);
  const cached = readCached(manifestFile, dir);
  if (cached !== null) return { code: cached };

  const started = Date.now();
  const inputs = new Set<string>();
  const { code } = await bundleWorkflowCode({
    workflowsPath: opts.workflowsPath,
    workflowInterceptorModules: opts.workflowInterceptorModules,
    logger: { log: quiet, info: quiet, warn: quiet, error: quiet, debug: quiet, trace: quiet },
    // Every file webpack read (its fileDependencies also name directories it looked into: those are left out below).
    webpackConfigHook: (config) => ({
      ...config,
      plugins: [
        ...(config.plugins ?? []),
        {
          apply(compiler) {
            compiler.hooks.afterEmit.tap('workflow-bundle-cache', (compilation) => {
              for (const f of compilation.fileDependencies) inputs.add(f);
            });
          },
        },
      ],
    }),
  });
  const hashes: Record<string, string> = {};
  for (const file of inputs) {
    if (!path.isAbsolute(file) || !fs.statSync(file, { throwIfNoEntry: false })?.isFile()) continue;
    const hash = fileHash(file);
    if (hash) hashes[file] = hash;
  }
  const bundle = `${key}-${sha256(code).slice(0, 16)}.js`;
  fs.mkdirSync(dir, { recursive: true });
  writeAtomically(path.join(dir, bundle), code);
  writeAtomically(manifestFile, JSON.stringify({ inputs: hashes, bundle } satisfies Manifest));
  // Bundles of earlier inputs: gone once no process can be about to read them.
  for (const f of fs.readdirSync(dir)) {
    if (!f.startsWith(`${key}-`) || f === bundle) continue;
    const stat = fs.statSync(path.join(dir, f), { throwIfNoEntry: false });
    if (stat && Date.now() - stat.mtimeMs > 10 * 60_000) fs.rmSync(path.join(dir, f), { force: true });
  }
  opts.log?.(
    `bundled ${path.relative(process.cwd(), opts.workflowsPath)} in ${Date.now() - started} ms (${Object.keys(hashes).length} inputs)`,
  );
  return { code };
}
