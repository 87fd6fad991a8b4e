/**
 * One Node service (api, worker or agent backend) as its own OS process, its output appended to a log file: the
 * cluster's compiled services (stack/cluster.ts) and the faults suite's tsx ones (test/faults/harness.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../core/project-root.js';

const ROOT = projectRoot(import.meta.url);

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
