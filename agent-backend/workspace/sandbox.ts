/**
 * The Local runtime of this backend: where workspaces live, the shellctl helper and its deployment
 * token, the isolation and network policy, and the `dify-agent` CLI put on PATH inside the sandbox.
 * One per backend process; runs borrow it through the runtime and shell modules.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { sandboxWeakSecrets, type Config } from '../../core/platform/config.js';
import type { Logger } from '../../core/platform/logger.js';
import { ensureSandboxTools, type SandboxTools } from '../../sandbox/build.js';
import { workspaceUid } from '../../core/protocol/workspace-uid.js';
import { ensureWorkspaceDirs } from './ensure.js';
import { runShellctl, stopHelper, type ShellResult } from './exec.js';

const run = promisify(execFile);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Where the agent stub's socket appears inside the sandbox (the `dify-agent` CLI's DIFY_AGENT_STUB_SOCKET). */
export const SANDBOX_STUB_SOCKET = '/run/dify-agent/stub.sock';

/** `shellctl probe` (issue 27): what this kernel and process offer. Fields an older shellctl lacks read as absent. */
export const ShellctlProbe = z
  .object({
    abi: z.number().int().catch(0),
    namespaces: z.boolean().optional(),
    user_namespace: z.boolean().optional(),
    seccomp: z.boolean().optional(),
    limits: z.string().optional(),
    uid_switch: z.boolean().optional(),
    /** A fresh /proc mounts in the command's PID namespace (a container's masked /proc refuses it). */
    proc: z.boolean().optional(),
  })
  .passthrough();
export type ShellctlProbe = z.infer<typeof ShellctlProbe>;

/** The isolation in force, as /readyz and the start-up log report it. */
export interface IsolationReport {
  /** `available`: commands run isolated; `refused`: isolation is on but something is missing (see `missing`);
   * `unconfined`: SHELL_ISOLATION=off; `unavailable`: runtime/shell are off in this deployment (see `reason`);
   * `unknown`: shellctl has not been probed yet. */
  shell: 'available' | 'refused' | 'unconfined' | 'unavailable' | 'unknown';
  isolation: 'on' | 'off';
  landlock_abi: number | null;
  namespaces: boolean | null;
  user_namespace: boolean | null;
  seccomp: boolean | null;
  limits: string | null;
  uid_switch: boolean | null;
  proc: boolean | null;
  missing: string[];
  reason: string | null;
}

/** What is missing for isolated commands, in words (empty: nothing). */
export function missingIsolation(probe: ShellctlProbe): string[] {
  const missing: string[] = [];
  // Any Landlock ABI (1 = Linux 5.13) restricts files; the network is the namespace's job on every kernel (issue 27 item 7).
  if (probe.abi < 1) missing.push('Landlock (the kernel offers none)');
  if (probe.namespaces !== true) missing.push('Linux namespaces (mount, PID, network, IPC, UTS)');
  // An older shellctl does not say (undefined): only a probe that tried and failed counts.
  else if (probe.proc === false) missing.push("a fresh /proc for the command's PID namespace (this /proc is masked)");
  return missing;
}

/** Whether this process runs in a container (Docker, Podman, Kubernetes), for the refusal's advice. */
export function inContainer(): boolean {
  if (fs.existsSync('/.dockerenv') || fs.existsSync('/run/.containerenv')) return true;
  const runtime = /docker|kubepods|containerd|libpod/;
  const read = (file: string) => {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  // cgroup v1 names the runtime; under cgroup v2 (only "0::/") the root file system does: an overlay whose layers
  // live in the runtime's directory (a host that runs containers has such mounts too, but not at "/").
  const root = read('/proc/self/mountinfo')
    .split('\n')
    .find((l) => l.split(' ')[4] === '/');
  return runtime.test(read('/proc/1/cgroup')) || runtime.test(root ?? '');
}

/** What a container needs for the sandbox (docs/deploying.md "The sandbox in a container"). */
export const CONTAINER_SANDBOX_ADVICE =
  "in a container the agent backend needs seccomp and AppArmor unconfined and /proc unmasked: docker-compose.yml's " +
  "security_opt (seccomp=unconfined, apparmor=unconfined, systempaths=unconfined) or the Helm chart's agentBackend.sandbox " +
  '(docs/deploying.md "The sandbox in a container")';

export interface ShellRequest {
  workspaceId: string;
  command: string;
  timeoutMs: number;
  maxOutputBytes: number;
  /** Agent stub access for the `dify-agent` CLI (only when the run has a `config` layer). */
  stubToken?: string;
  signal?: AbortSignal;
  track?: (child: ChildProcess) => () => void;
}

export class Sandbox {
  /** Non-null when runtime/shell cannot be offered at all (compositions using them are rejected). */
  readonly unavailableReason: string | null;
  readonly isolation: boolean;
  private readonly token: string;
  private readonly tokenFile: string;
  private stubSocket: string | null = null;
  private prepared: Promise<SandboxTools> | null = null;
  private probe: ShellctlProbe | null = null;
  private readonly containerized = inContainer();

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {
    this.token = (config.SHELLCTL_AUTH_TOKEN ?? '').trim();
    this.tokenFile = path.resolve(config.SHELLCTL_TOKEN_FILE ?? path.join(config.dataDir, 'sandbox', 'shellctl.token'));
    this.isolation = config.SHELL_ISOLATION === 'on';
    const weak = sandboxWeakSecrets(config);
    this.unavailableReason = !this.token
      ? 'the runtime and shell modules need a deployment auth token for shellctl: set SHELLCTL_AUTH_TOKEN (docs/workspace.md)'
      : weak.length
        ? `the runtime and shell modules are refused while ${weak.join(' and ')} ${weak.length > 1 ? 'hold their' : 'holds its'} public development default: ` +
          'set your own (npm start generates them into DATA_DIR/secrets.json; docs/workspace.md)'
        : null;
  }

  get limits() {
    return {
      timeoutMs: this.config.SHELL_TIMEOUT_MS,
      maxOutputBytes: this.config.SHELL_MAX_OUTPUT_BYTES,
      outputFileMaxBytes: this.config.WORKSPACE_OUTPUT_MAX_BYTES,
    };
  }

  /** Stub tokens are HMACs under the backend token (stub-token.ts). */
  get stubTokenSecret(): string {
    return this.config.AGENT_BACKEND_TOKEN;
  }

  /** The agent stub's unix socket (agent-backend/stub-server.ts), bind-mounted into the sandbox for the CLI. */
  setStubSocket(socketPath: string | null): void {
    this.stubSocket = socketPath;
  }

  /** Why a command cannot run isolated here (null: it can, or isolation is off); known once shellctl was probed. */
  get refusal(): string | null {
    if (!this.isolation || !this.probe) return null;
    const missing = missingIsolation(this.probe);
    if (!missing.length) return null;
    const why = `this host lacks ${missing.join(' and ')}, needed to isolate commands from other tenants (SHELL_ISOLATION=on; docs/workspace.md)`;
    return this.containerized ? `${why}; ${CONTAINER_SANDBOX_ADVICE}` : why;
  }

  isolationReport(): IsolationReport {
    const p = this.probe;
    const base = {
      isolation: this.isolation ? ('on' as const) : ('off' as const),
      landlock_abi: p ? p.abi : null,
      namespaces: p?.namespaces ?? null,
      user_namespace: p?.user_namespace ?? null,
      seccomp: p?.seccomp ?? null,
      limits: p?.limits ?? null,
      uid_switch: p?.uid_switch ?? null,
      proc: p?.proc ?? null,
      missing: p && this.isolation ? missingIsolation(p) : [],
    };
    if (this.unavailableReason) return { ...base, shell: 'unavailable', reason: this.unavailableReason };
    if (!p) return { ...base, shell: 'unknown', reason: 'shellctl has not been probed yet' };
    if (!this.isolation) return { ...base, shell: 'unconfined', reason: 'SHELL_ISOLATION=off: commands run without isolation' };
    const refusal = this.refusal;
    return { ...base, shell: refusal ? 'refused' : 'available', reason: refusal };
  }

  /** The uid/gid a workspace's commands run as, when shellctl can switch uids (root, isolation on). */
  ownerOf(workspaceId: string): { uid: number; gid: number } | undefined {
    if (!this.isolation || this.probe?.uid_switch !== true) return undefined;
    return workspaceUid(workspaceId, { base: this.config.SHELL_UID_BASE, range: this.config.SHELL_UID_RANGE });
  }

  /** Builds/locates shellctl and the CLI, provisions the token file, checks Landlock. Once per process. */
  prepare(): Promise<SandboxTools> {
    if (this.unavailableReason) return Promise.reject(new Error(this.unavailableReason));
    this.prepared ??= this.doPrepare();
    return this.prepared;
  }

  private async doPrepare(): Promise<SandboxTools> {
    const tools = await ensureSandboxTools({
      shellctlPath: this.config.SHELLCTL_PATH,
      goBin: this.config.GO_BIN,
      log: (m) => this.logger.info(m),
    }).catch((err: unknown) => {
      this.prepared = null; // a later run tries again (e.g. after Go was installed)
      throw err;
    });
    if (!fs.existsSync(this.tokenFile)) {
      fs.mkdirSync(path.dirname(this.tokenFile), { recursive: true, mode: 0o700 });
      try {
        fs.writeFileSync(this.tokenFile, `${this.token}\n`, { mode: 0o600, flag: 'wx' });
        this.logger.info({ tokenFile: this.tokenFile }, 'shellctl token file written from SHELLCTL_AUTH_TOKEN');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another process wrote it first
      }
    }
    if (fs.readFileSync(this.tokenFile, 'utf8').trim() !== this.token) {
      this.logger.error(
        { tokenFile: this.tokenFile },
        'SHELLCTL_AUTH_TOKEN does not match the shellctl token file: every shell command will be refused',
      );
    }
    fs.mkdirSync(this.config.workspacesDir, { recursive: true });
    this.probe = await probeShellctl(tools.shellctl, this.helperEnv()).catch((err: unknown) => {
      this.logger.error({ err: (err as Error).message }, 'shellctl probe failed: every agent shell command will be refused');
      return ShellctlProbe.parse({ abi: 0 });
    });
    const report = this.isolationReport();
    const { shell: _shell, reason: _reason, ...isolation } = report;
    if (report.shell === 'unconfined') {
      this.logger.warn(
        { isolation },
        'SHELL_ISOLATION=off: agent shell commands run WITHOUT isolation (no Landlock, namespaces, uid switch, seccomp or limits): any command can read this host as the backend user',
      );
    } else if (report.shell === 'refused') {
      this.logger.error({ isolation }, report.reason!);
    } else {
      this.logger.info({ isolation, network: this.config.SHELL_NETWORK }, 'agent shell: isolation in force');
    }
    return tools;
  }

  workspaceDir(workspaceId: string): string {
    if (!UUID.test(workspaceId)) throw new Error(`invalid workspace id '${workspaceId}'`);
    return path.join(this.config.workspacesDir, workspaceId.toLowerCase());
  }

  /**
   * Creates the workspace on first use (with its private tmp and `outputs/`, whose new files become message files),
   * keeps it across turns. With a uid switch, the three directories belong to the workspace's own uid (never
   * following a symlink the agent left at one of them).
   */
  ensureWorkspace(workspaceId: string): string {
    // By descriptor, never by path: the agent may swap entries of its workspace while this runs (ensure.ts).
    return ensureWorkspaceDirs(this.workspaceDir(workspaceId), this.ownerOf(workspaceId));
  }

  private helperEnv(): Record<string, string> {
    return shellctlHelperEnv(this.config);
  }

  async exec(req: ShellRequest): Promise<ShellResult> {
    const tools = await this.prepare();
    const refusal = this.refusal;
    if (refusal)
      return {
        status: 'sandbox_error',
        exitCode: null,
        stdout: '',
        stderr: '',
        stdoutTruncated: false,
        stderrTruncated: false,
        message: refusal,
        isolated: false,
      };
    const workspace = this.ensureWorkspace(req.workspaceId);
    if (!this.isolation) this.logger.warn({ workspace }, 'agent shell command runs WITHOUT isolation (SHELL_ISOLATION=off)');
    const env: Record<string, string> = {
      PATH: `${tools.binDir}:/usr/local/bin:/usr/bin:/bin`,
      HOME: workspace,
      LANG: 'C.UTF-8',
      TMPDIR: path.join(workspace, '.tmp'),
    };
    // The stub is reached only through its own socket (stub routes, no run protocol): bind-mounted at a fixed path
    // inside the sandbox; without isolation there is no mount namespace, so the command gets the host path.
    const bindSockets: { host: string; sandbox: string }[] = [];
    if (req.stubToken && this.stubSocket && this.config.SHELL_NETWORK === 'stub') {
      env.DIFY_AGENT_STUB_TOKEN = req.stubToken;
      if (this.isolation) {
        bindSockets.push({ host: this.stubSocket, sandbox: SANDBOX_STUB_SOCKET });
        env.DIFY_AGENT_STUB_SOCKET = SANDBOX_STUB_SOCKET;
      } else env.DIFY_AGENT_STUB_SOCKET = this.stubSocket;
    }
    // The CLI's directory and, when node lives outside the system dirs, node's own directory.
    const readOnly = [tools.binDir];
    const nodeDir = path.dirname(process.execPath);
    if (!/^\/(usr|bin|opt)\//.test(process.execPath)) readOnly.push(nodeDir);
    const c = this.config;
    return runShellctl({
      shellctl: tools.shellctl,
      tokenFile: this.tokenFile,
      token: this.token,
      workspace,
      readOnly,
      bindSockets,
      owner: this.ownerOf(req.workspaceId),
      limits: {
        procs: c.SHELL_LIMIT_PROCS,
        memoryBytes: c.SHELL_LIMIT_MEMORY_BYTES,
        cpuSeconds: c.SHELL_LIMIT_CPU_SECONDS,
        fileBytes: c.SHELL_LIMIT_FILE_BYTES,
        openFiles: c.SHELL_LIMIT_OPEN_FILES,
        workspaceQuotaBytes: c.WORKSPACE_QUOTA_BYTES,
      },
      isolation: this.isolation,
      timeoutMs: req.timeoutMs,
      maxOutputBytes: req.maxOutputBytes,
      env,
      helperEnv: this.helperEnv(),
      command: req.command,
      signal: req.signal,
      track: req.track,
    });
  }
}

/** Live helper processes of one run; released (killed) when the run's runtime scope ends. */
export class ProcessSet {
  private readonly live = new Set<ChildProcess>();
  track = (child: ChildProcess) => {
    this.live.add(child);
    return () => void this.live.delete(child);
  };
  get size(): number {
    return this.live.size;
  }
  async killAll(): Promise<void> {
    await Promise.all([...this.live].map((c) => stopHelper(c)));
    this.live.clear();
  }
}

/** `shellctl probe`, parsed. */
export async function probeShellctl(shellctl: string, env: Record<string, string> = {}): Promise<ShellctlProbe> {
  const { stdout } = await run(shellctl, ['probe'], { env, timeout: 10_000 });
  return ShellctlProbe.parse(JSON.parse(stdout));
}

/** Environment for shellctl itself (tests force what the kernel "lacks"); shellctl never passes SHELLCTL_* on. */
export function shellctlHelperEnv(c: Config): Record<string, string> {
  return {
    ...(c.SHELLCTL_FORCE_NO_LANDLOCK ? { SHELLCTL_FORCE_NO_LANDLOCK: '1' } : {}),
    ...(c.SHELLCTL_FORCE_ABI !== undefined ? { SHELLCTL_FORCE_ABI: String(c.SHELLCTL_FORCE_ABI) } : {}),
    ...(c.SHELLCTL_FORCE_NO_NAMESPACES ? { SHELLCTL_FORCE_NO_NAMESPACES: '1' } : {}),
    ...(c.SHELLCTL_FORCE_RLIMITS ? { SHELLCTL_FORCE_RLIMITS: '1' } : {}),
  };
}

/**
 * Whether this process could offer isolated shell commands (npm start turns the demo agent's hands on then): its own
 * backend, a shellctl token, no default secrets, isolation on, shellctl builds and its probe shows Landlock and
 * namespaces. Builds shellctl and the CLI as a side effect (the backend finds them up to date).
 */
export async function sandboxAvailableHere(config: Config, log?: (m: string) => void): Promise<{ ok: true } | { ok: false; why: string }> {
  if (config.AGENT_BACKEND_URL) return { ok: false, why: 'the agent backend is external (AGENT_BACKEND_URL)' };
  const unavailable = new Sandbox(config, { info: () => undefined } as unknown as Logger).unavailableReason;
  if (unavailable) return { ok: false, why: unavailable };
  if (config.SHELL_ISOLATION !== 'on') return { ok: false, why: 'SHELL_ISOLATION=off (commands would run unconfined)' };
  let tools: SandboxTools;
  try {
    tools = await ensureSandboxTools({ shellctlPath: config.SHELLCTL_PATH, goBin: config.GO_BIN, log });
  } catch (err) {
    return { ok: false, why: (err as Error).message };
  }
  let probe: ShellctlProbe;
  try {
    probe = await probeShellctl(tools.shellctl, shellctlHelperEnv(config));
  } catch (err) {
    return { ok: false, why: `shellctl probe failed: ${(err as Error).message}` };
  }
  const missing = missingIsolation(probe);
  return missing.length ? { ok: false, why: `this host lacks ${missing.join(' and ')}` } : { ok: true };
}
