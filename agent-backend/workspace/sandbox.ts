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
import type { Config } from '../../core/config.js';
import type { Logger } from '../../core/logger.js';
import { ensureSandboxTools, type SandboxTools } from '../../sandbox/build.js';
import { OUTPUTS_DIR } from '../../core/workspace-outputs.js';
import { runShellctl, stopHelper, type ShellResult } from './exec.js';

const run = promisify(execFile);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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
  private stubUrl: string | null = null;
  private prepared: Promise<SandboxTools> | null = null;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {
    this.token = (config.SHELLCTL_AUTH_TOKEN ?? '').trim();
    this.tokenFile = path.resolve(config.SHELLCTL_TOKEN_FILE ?? path.join(config.dataDir, 'sandbox', 'shellctl.token'));
    this.isolation = config.SHELL_ISOLATION === 'on';
    this.unavailableReason = this.token
      ? null
      : 'the runtime and shell modules need a deployment auth token for shellctl: set SHELLCTL_AUTH_TOKEN (README "Agent workspace")';
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

  /** The backend's own base URL, where the sandboxed `dify-agent` CLI reaches the agent stub. */
  setStubUrl(url: string): void {
    this.stubUrl = url;
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
    let abi = 0;
    try {
      const { stdout } = await run(tools.shellctl, ['probe'], { env: this.helperEnv(), timeout: 10_000 });
      abi = Number((JSON.parse(stdout) as { abi?: unknown }).abi) || 0;
    } catch (err) {
      this.logger.error({ err }, 'shellctl probe failed');
    }
    if (!this.isolation) {
      this.logger.warn('SHELL_ISOLATION=off: agent shell commands run WITHOUT Landlock path or network isolation');
    } else if (abi < 4) {
      this.logger.error({ abi }, 'Landlock ABI >= 4 is not available: every agent shell command will be refused (SHELL_ISOLATION=on)');
    } else {
      this.logger.info({ abi, network: this.config.SHELL_NETWORK }, 'agent shell: Landlock isolation active');
    }
    return tools;
  }

  workspaceDir(workspaceId: string): string {
    if (!UUID.test(workspaceId)) throw new Error(`invalid workspace id '${workspaceId}'`);
    return path.join(this.config.workspacesDir, workspaceId.toLowerCase());
  }

  /** Creates the workspace on first use (with its private tmp and `outputs/`, whose new files become message files), keeps it across turns. */
  ensureWorkspace(workspaceId: string): string {
    const dir = this.workspaceDir(workspaceId);
    fs.mkdirSync(path.join(dir, '.tmp'), { recursive: true });
    // Not recursive: a symlink the agent put at outputs/ stays as it is (and attaches nothing).
    try {
      fs.mkdirSync(path.join(dir, OUTPUTS_DIR));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    return dir;
  }

  private helperEnv(): Record<string, string> {
    return this.config.SHELLCTL_FORCE_NO_LANDLOCK ? { SHELLCTL_FORCE_NO_LANDLOCK: '1' } : {};
  }

  async exec(req: ShellRequest): Promise<ShellResult> {
    const tools = await this.prepare();
    const workspace = this.ensureWorkspace(req.workspaceId);
    if (!this.isolation) this.logger.warn({ workspace }, 'agent shell command runs WITHOUT isolation (SHELL_ISOLATION=off)');
    const env: Record<string, string> = {
      PATH: `${tools.binDir}:/usr/local/bin:/usr/bin:/bin`,
      HOME: workspace,
      LANG: 'C.UTF-8',
      TMPDIR: path.join(workspace, '.tmp'),
    };
    const allowConnect: number[] = [];
    if (req.stubToken && this.stubUrl) {
      env.DIFY_AGENT_STUB_URL = this.stubUrl;
      env.DIFY_AGENT_STUB_TOKEN = req.stubToken;
      if (this.config.SHELL_NETWORK === 'stub') {
        const u = new URL(this.stubUrl);
        allowConnect.push(Number(u.port || (u.protocol === 'https:' ? 443 : 80)));
      }
    }
    // The CLI's directory and, when node lives outside the system dirs, node's own directory.
    const readOnly = [tools.binDir];
    const nodeDir = path.dirname(process.execPath);
    if (!/^\/(usr|bin|opt)\//.test(process.execPath)) readOnly.push(nodeDir);
    return runShellctl({
      shellctl: tools.shellctl,
      tokenFile: this.tokenFile,
      token: this.token,
      workspace,
      readOnly,
      allowConnect,
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
