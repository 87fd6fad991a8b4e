/**
 * One shell command through shellctl: spawned in a new session (so it is its own process group),
 * with an explicit environment (nothing inherited), stdout/stderr kept up to a cap each, and the
 * helper's JSON status read from fd 3. Abort (run cancelled, run ended) sends SIGTERM to shellctl,
 * which kills the command's whole tree; SIGKILL to its group follows if it does not exit in time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { z } from 'zod';

/** The isolation one command ran under (issue 27); absent from an older shellctl's status. */
export const ShellctlIsolation = z
  .object({
    landlock_abi: z.number().int().optional(),
    namespaces: z.boolean().optional(),
    user_namespace: z.boolean().optional(),
    seccomp: z.boolean().optional(),
    limits: z.string().optional(),
    uid: z.number().int().optional(),
  })
  .passthrough();

/** Which limit stopped the command, when one did. */
export const ShellLimit = z.enum(['memory', 'procs', 'cpu', 'file_size', 'wall_clock', 'workspace_quota']);
export type ShellLimit = z.infer<typeof ShellLimit>;

export const ShellctlStatus = z.object({
  status: z.enum(['exited', 'timeout', 'killed', 'sandbox_error', 'auth_failed', 'usage']),
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  message: z.string().optional(),
  abi: z.number().int(),
  isolated: z.boolean(),
  isolation: ShellctlIsolation.optional(),
  // An unknown limit name from a newer shellctl reads as "some limit" rather than failing the whole status.
  limit: z.union([ShellLimit, z.string()]).optional(),
});
export type ShellctlStatus = z.infer<typeof ShellctlStatus>;

/** Resource limits of one command (core/platform/config.ts SHELL_LIMIT_*, WORKSPACE_QUOTA_BYTES). */
export interface ShellLimits {
  procs: number;
  memoryBytes: number;
  cpuSeconds: number;
  fileBytes: number;
  openFiles: number;
  workspaceQuotaBytes: number;
}

export interface ShellctlInvocation {
  shellctl: string;
  tokenFile: string;
  token: string;
  workspace: string;
  readOnly: string[];
  /** Unix sockets bind-mounted into the sandbox: host path → path inside (the agent stub). */
  bindSockets: { host: string; sandbox: string }[];
  /** The workspace's own uid/gid (core/protocol/workspace-uid.ts); omitted when shellctl cannot switch uids. */
  owner?: { uid: number; gid: number };
  limits: ShellLimits;
  isolation: boolean;
  timeoutMs: number;
  maxOutputBytes: number;
  /** The command's whole environment (nothing else is inherited). */
  env: Record<string, string>;
  /** Extra environment for shellctl itself (never passed to the command: shellctl drops SHELLCTL_*). */
  helperEnv?: Record<string, string>;
  command: string;
  signal?: AbortSignal;
  /** Called with the helper process while it runs (so a runtime can kill what is left on release). */
  track?: (child: ChildProcess) => () => void;
}

export interface ShellResult {
  status: ShellctlStatus['status'] | 'helper_failed';
  exitCode: number | null;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  message?: string;
  isolated: boolean;
  /** The limit that stopped the command (shellctl's status `limit`). */
  limit?: string;
  isolation?: z.infer<typeof ShellctlIsolation>;
}

/** Keeps the first `max` bytes of a stream and counts the rest. */
class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  dropped = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    const room = this.max - this.kept;
    if (room > 0) {
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(part);
      this.kept += part.length;
    }
    this.dropped += Math.max(0, chunk.length - Math.max(room, 0));
  }
  text(): string {
    // A cut may split a UTF-8 sequence: the incomplete tail is dropped (streaming decode), not mangled.
    const s = new TextDecoder('utf-8').decode(Buffer.concat(this.chunks), { stream: this.dropped > 0 });
    return this.dropped > 0 ? `${s}\n[output truncated: ${this.dropped} more bytes not shown]` : s;
  }
}

const KILL_GRACE_MS = 3_000;

export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** SIGTERM to shellctl (it kills the command's tree and exits), SIGKILL to its group after a grace period. */
export function stopHelper(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => killGroup(child), KILL_GRACE_MS);
  return exited.finally(() => clearTimeout(timer));
}

export function runShellctl(inv: ShellctlInvocation): Promise<ShellResult> {
  const args = [
    'exec',
    '--workspace',
    inv.workspace,
    '--token-file',
    inv.tokenFile,
    '--status-fd',
    '3',
    '--timeout-ms',
    String(inv.timeoutMs),
  ];
  for (const p of inv.readOnly) args.push('--ro', p);
  for (const b of inv.bindSockets) args.push('--bind-socket', `${b.host}:${b.sandbox}`);
  if (inv.owner) args.push('--uid', String(inv.owner.uid), '--gid', String(inv.owner.gid));
  const l = inv.limits;
  args.push(
    '--limit-procs',
    String(l.procs),
    '--limit-memory-bytes',
    String(l.memoryBytes),
    '--limit-cpu-seconds',
    String(l.cpuSeconds),
    '--limit-file-bytes',
    String(l.fileBytes),
    '--limit-open-files',
    String(l.openFiles),
    '--workspace-quota-bytes',
    String(l.workspaceQuotaBytes),
  );
  if (!inv.isolation) args.push('--no-isolation');
  args.push('--', '/bin/sh', '-c', inv.command);

  return new Promise<ShellResult>((resolve) => {
    const child = spawn(inv.shellctl, args, {
      cwd: inv.workspace,
      env: { ...inv.env, ...inv.helperEnv, SHELLCTL_TOKEN: inv.token },
      detached: true, // new session: the helper and everything it starts are one group, away from ours
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const untrack = inv.track?.(child) ?? (() => undefined);
    const stdout = new CappedBuffer(inv.maxOutputBytes);
    const stderr = new CappedBuffer(inv.maxOutputBytes);
    let statusText = '';
    child.stdout!.on('data', (c: Buffer) => stdout.push(c));
    child.stderr!.on('data', (c: Buffer) => stderr.push(c));
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (c: Buffer) => (statusText += c.toString('utf8')));
    (child.stdio[3] as NodeJS.ReadableStream).on('error', () => undefined);

    let spawnError: Error | null = null;
    let settled = false;
    const onAbort = () => void stopHelper(child);
    if (inv.signal?.aborted) onAbort();
    else inv.signal?.addEventListener('abort', onAbort, { once: true });
    // The helper enforces the time limit itself; this is the backstop if the helper hangs.
    const backstop = setTimeout(() => void stopHelper(child), inv.timeoutMs + 10_000);

    const finish = (code: number | null, sig: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(backstop);
      inv.signal?.removeEventListener('abort', onAbort);
      untrack();
      const parsed = ShellctlStatus.safeParse(tryJson(statusText.trim().split('\n').pop() ?? ''));
      const base = {
        stdout: stdout.text(),
        stderr: stderr.text(),
        stdoutTruncated: stdout.dropped > 0,
        stderrTruncated: stderr.dropped > 0,
      };
      if (!parsed.success) {
        const why = spawnError
          ? `cannot start shellctl: ${(spawnError as Error).message}`
          : `shellctl ended (${sig ?? `exit ${code}`}) without a status`;
        resolve({ ...base, status: 'helper_failed', exitCode: null, message: why, isolated: inv.isolation });
        return;
      }
      const s = parsed.data;
      resolve({
        ...base,
        status: s.status,
        exitCode: s.exit_code ?? null,
        message: s.message,
        isolated: s.isolated,
        ...(s.limit ? { limit: s.limit } : {}),
        ...(s.isolation ? { isolation: s.isolation } : {}),
      });
    };
    child.once('close', finish);
    child.once('error', (err) => {
      spawnError = err;
      // Never started (e.g. the binary is missing): there will be no exit to wait for.
      if (child.pid === undefined) finish(null, null);
    });
  });
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
