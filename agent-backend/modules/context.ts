/**
 * execution_context, llm, output and config modules: one capability each, small configs; and the
 * agent workspace: `runtime` (Local runtime: the workspace and its processes) and `shell` (a tool that
 * runs commands in it through shellctl). Resource scopes nest Runtime → Shell → Config: layers enter
 * in composition order and their leases are released in reverse, in `finally`.
 */
import { z } from 'zod';
import { ExecutionContextLayerConfig, LlmLayerConfig } from '../../core/protocol/run.js';
import { formatZodError } from '../errors.js';
import { mintStubToken } from '../stub-token.js';
import type { ShellResult } from '../workspace/exec.js';
import { writeMarker } from '../../core/domain/workspace-marker.js';
import { checkWorkspaceMarker } from '../workspace/marker.js';
import { ProcessSet, type Sandbox } from '../workspace/sandbox.js';
import { posixWorkspaceStore, type WorkspaceStore } from '../workspace/store.js';
import type { WorkspaceAuthorizer } from '../workspace-authorizer.js';
import {
  changedOutputs,
  listOutputs,
  MAX_OUTPUT_FILES,
  OUTPUTS_DIR,
  outputFileType,
  outputRef,
  OutputRefused,
  readOutputFile,
  sha256,
} from '../../core/domain/workspace-outputs.js';
import { OutputQuota } from '../../core/domain/output-quota.js';
import { defineModule, Mutex, type ToolCallContext, type ToolOutcome } from './types.js';
import { toolParameters } from './json-schema.js';

const NoState = z.object({}).strict() as z.ZodType<Record<string, never>>;

/** Who the run acts for (tenant, user, app, conversation, agent, config version); signed by the api. */
export const executionContext = defineModule<ExecutionContextLayerConfig, Record<string, never>>({
  name: 'execution_context',
  capability: 'execution_context',
  description: 'Tenant/user/app/conversation/agent scope of the run, signed by the api.',
  configSchema: ExecutionContextLayerConfig,
  stateSchema: NoState,
  initialState: () => ({}),
  create: ({ name, config, state }) => ({
    name,
    type: 'execution_context',
    state,
    capability: { kind: 'execution_context', context: () => config },
  }),
});

type LlmConfig = z.infer<typeof LlmLayerConfig>;

/** The model: provider + model + whitelisted settings. Never credentials (the api holds them). */
export const llm = defineModule<LlmConfig, Record<string, never>>({
  name: 'llm',
  capability: 'model',
  description: 'Model selection and whitelisted model settings; calls go through the api inner LLM endpoint.',
  configSchema: LlmLayerConfig,
  stateSchema: NoState,
  initialState: () => ({}),
  references: (c) => [{ field: 'execution_context', layer: c.execution_context, types: ['execution_context'] }],
  create: ({ name, config, state }) => ({
    name,
    type: 'llm',
    state,
    capability: {
      kind: 'model',
      binding: () => ({
        provider: config.provider,
        model: config.model,
        settings: config.model_settings,
        executionContextLayer: config.execution_context,
        ...(config.context_window ? { contextWindow: config.context_window } : {}),
        ...(config.max_output ? { maxOutput: config.max_output } : {}),
        ...(config.prices ? { prices: config.prices } : {}),
      }),
    },
  }),
});

const OutputConfig = z.object({ type: z.literal('text').default('text') }).strict();

/** Output type of the run: plain text (the final model response). */
export const output = defineModule<z.infer<typeof OutputConfig>, Record<string, never>>({
  name: 'output',
  capability: 'output',
  description: 'The run output: the final model response text.',
  configSchema: OutputConfig,
  stateSchema: NoState,
  initialState: () => ({}),
  create: ({ name, state }) => ({ name, type: 'output', state, capability: { kind: 'output', finalize: (text) => text } }),
});

const ConfigModuleConfig = z.object({ execution_context: z.string().default('execution_context') }).strict();

/**
 * The agent-config resource scope: while this layer is entered the run's agent stub
 * (`/agent-stub/config/prompt`, used by the `dify-agent` CLI) accepts the run's stub token. The token
 * is a temporary credential leased on enter and released on exit.
 */
export const configModule = defineModule<z.infer<typeof ConfigModuleConfig>, Record<string, never>>({
  name: 'config',
  capability: 'resource',
  description: 'Agent configuration access (dify-agent CLI through the agent stub).',
  configSchema: ConfigModuleConfig,
  stateSchema: NoState,
  initialState: () => ({}),
  references: (c) => [{ field: 'execution_context', layer: c.execution_context, types: ['execution_context'] }],
  create: ({ name, state, services }) => ({
    name,
    type: 'config',
    state,
    capability: { kind: 'resource' },
    async enter() {
      services.resources.acquire('agent_stub', { layer: name }, () => undefined);
    },
  }),
});

// ---- runtime + shell (agent workspace) --------------------------------------------------------

const RuntimeConfig = z
  .object({
    kind: z.literal('local').default('local'),
    /** The workspace (owned by the api's binding); the backend maps it to a directory. */
    workspace_id: z.uuid(),
    /** The signed context that authorizes the workspace for this run (issue 27). */
    execution_context: z.string().default('execution_context'),
    /**
     * The api expects the workspace to exist already (its binding has had a turn; issue 31): a missing or foreign
     * workspace then fails the run `binding_lost` instead of starting empty (agent-backend/workspace/marker.ts).
     */
    expect_existing: z.boolean().default(false),
    /** The workspace's generation (the api's AgentWorkspace.generation), recorded in and checked against its marker. */
    generation: z.number().int().positive().default(1),
  })
  .strict();

/** The lease a runtime layer holds while entered: its workspace and the processes started in it. */
export interface RuntimeLease {
  workspaceId: string;
  processes: ProcessSet;
  /** Puts an attached output file where the worker reads it (agent-backend/workspace/store.ts publish). */
  publish: (bytes: Buffer) => Promise<void>;
}

export const runtimeLeaseKey = (layer: string) => `runtime:${layer}`;

/**
 * `authorizer`: asks the api whether the run may use the workspace it names (agent-backend/workspace-authorizer.ts);
 * without one the module is unavailable (a workspace is never entered on the request's word alone).
 * `store`: where the workspace lives between runs (agent-backend/workspace/store.ts): restored before the marker check,
 * saved when the lease is released — after the run's processes are killed, on success, an ask_human pause, failure and
 * stop alike (a save that fails fails the release, so the run does not end as if its files were kept).
 */
export function createRuntimeModule(sandbox?: Sandbox, authorizer?: WorkspaceAuthorizer, store: WorkspaceStore = posixWorkspaceStore) {
  return defineModule<z.infer<typeof RuntimeConfig>, Record<string, never>>({
    name: 'runtime',
    capability: 'resource',
    description: 'Local runtime: the agent workspace (a directory kept across turns) and the processes started in it.',
    configSchema: RuntimeConfig,
    stateSchema: NoState,
    initialState: () => ({}),
    unavailable: !sandbox || !authorizer ? 'module runtime is not available in this deployment' : (sandbox.unavailableReason ?? undefined),
    references: (c) => [{ field: 'execution_context', layer: c.execution_context, types: ['execution_context'] }],
    create: ({ name, config, state, services }) => ({
      name,
      type: 'runtime',
      state,
      capability: { kind: 'resource' },
      async enter() {
        if (!sandbox || !authorizer) throw new Error('module runtime is not available in this deployment');
        // The api confirms the workspace is this run's (signed context + binding) before anything touches it.
        await authorizer.authorize({
          executionContext: services.executionContext?.(config.execution_context) ?? null,
          workspaceId: config.workspace_id,
          runId: services.runId,
          signal: services.signal,
        });
        await sandbox.prepare();
        const identity = { workspaceId: config.workspace_id, generation: config.generation };
        const dir = sandbox.workspaceDir(config.workspace_id);
        // The latest saved version first (s3: from the bucket, wherever the last turn ran); it rewrites the marker.
        await store.restore(dir, identity, sandbox.ownerOf(config.workspace_id));
        // Its identity before anything creates the directory: a lost workspace is binding_lost, never recreated empty.
        const marker = checkWorkspaceMarker(dir, identity, config.expect_existing);
        sandbox.ensureWorkspace(config.workspace_id);
        if (marker.write) writeMarker(dir, identity);
        const lease: RuntimeLease = {
          workspaceId: config.workspace_id,
          processes: new ProcessSet(),
          publish: (bytes) => store.publish(identity, bytes),
        };
        // Released last (acquired first): whatever still runs in the workspace is killed, then the workspace is saved.
        services.resources.acquire(runtimeLeaseKey(name), lease, async () => {
          await lease.processes.killAll();
          await store.save(dir, identity);
        });
      },
    }),
  });
}

const ShellConfig = z
  .object({
    runtime: z.string().default('runtime'),
    timeout_ms: z.number().int().positive().max(3_600_000).optional(),
    max_output_bytes: z.number().int().positive().max(10_000_000).optional(),
    /** What this turn may still attach from outputs/, bytes (core/domain/output-quota.ts; the api computes it). */
    output_quota: z
      .object({
        turn_bytes: z.number().int().nonnegative(),
        turn_used_bytes: z.number().int().nonnegative(),
        tenant_day_bytes: z.number().int().nonnegative(),
        tenant_day_used_bytes: z.number().int().nonnegative(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The run's shell as other tools use it (the `code` builtin): one command, the shell's sandbox, limits and queue. */
export interface ShellRunner {
  run(req: { command: string; timeoutMs?: number; observe?: (r: ShellResult) => ToolOutcome }, ctx: ToolCallContext): Promise<ToolOutcome>;
}
export const SHELL_RUNNER = 'shell_runner';

const ShellArgs = z
  .object({
    command: z.string().min(1).max(20_000).describe('A POSIX shell command line, run with /bin/sh -c in the workspace directory'),
    timeout_ms: z.number().int().positive().optional().describe('Time limit in ms (at most the configured limit)'),
  })
  .strict();

export function createShellModule(sandbox?: Sandbox) {
  return defineModule<z.infer<typeof ShellConfig>, Record<string, never>>({
    name: 'shell',
    capability: 'toolset',
    description:
      'The `shell` tool: runs a command in the runtime’s workspace (isolated through shellctl: namespaces, Landlock, own uid, limits).',
    configSchema: ShellConfig,
    stateSchema: NoState,
    initialState: () => ({}),
    unavailable: !sandbox ? 'module shell is not available in this deployment' : (sandbox.unavailableReason ?? undefined),
    references: (c) => [{ field: 'runtime', layer: c.runtime, types: ['runtime'] }],
    create: ({ name, config, state, services }) => {
      const mutex = new Mutex();
      const sessions = new ProcessSet();
      const caps = sandbox?.limits ?? { timeoutMs: 60_000, maxOutputBytes: 16_384, outputFileMaxBytes: 10 * 1024 * 1024 };
      const defaultTimeout = Math.min(config.timeout_ms ?? caps.timeoutMs, caps.timeoutMs);
      const maxOutput = Math.min(config.max_output_bytes ?? caps.maxOutputBytes, caps.maxOutputBytes);
      // Counted over the run's commands: a turn's attached bytes (the api checks again when it copies them).
      const quota = config.output_quota ? new OutputQuota(config.output_quota) : undefined;
      // Commands of one shell run one at a time (they share the workspace), `code` programs among them.
      const runner: ShellRunner = {
        run: (req, ctx) =>
          mutex.run(async (): Promise<ToolOutcome> => {
            const lease = services.resources.get<RuntimeLease>(runtimeLeaseKey(config.runtime));
            if (!sandbox || !lease) return { kind: 'result', result: 'the shell has no runtime in this run', isError: true };
            const stub = services.resources.get('agent_stub') !== undefined;
            const track = (child: Parameters<ProcessSet['track']>[0]) => {
              const a = lease.processes.track(child);
              const b = sessions.track(child);
              return () => {
                a();
                b();
              };
            };
            const workspaceDir = sandbox.workspaceDir(lease.workspaceId);
            const before = await listOutputs(workspaceDir);
            const r = await sandbox.exec({
              workspaceId: lease.workspaceId,
              command: req.command,
              // The model may ask for less time than the layer allows, never more.
              timeoutMs: Math.min(req.timeoutMs ?? defaultTimeout, defaultTimeout),
              maxOutputBytes: maxOutput,
              stubToken: stub ? mintStubToken(sandbox.stubTokenSecret, ctx.runId) : undefined,
              signal: ctx.signal,
              track,
            });
            const outcome = (req.observe ?? shellObservation)(r);
            if (r.status !== 'exited' && r.status !== 'timeout' && r.status !== 'killed') return outcome;
            return withOutputFiles(
              outcome,
              workspaceDir,
              changedOutputs(before, await listOutputs(workspaceDir)),
              caps.outputFileMaxBytes,
              quota,
              lease.publish,
            );
          }),
      };
      return {
        name,
        type: 'shell',
        state,
        async enter() {
          // The shell session scope: commands still running when the run ends are killed here.
          services.resources.acquire(`shell:${name}`, sessions, () => sessions.killAll());
          // Other tools that run in this sandbox (the builtin `code`) go through this shell: its limits, its queue.
          services.resources.acquire(SHELL_RUNNER, runner, () => undefined);
        },
        capability: {
          kind: 'toolset',
          tools: () => [
            {
              name: 'shell',
              description:
                'Run a shell command in your workspace (a private directory kept across the turns of this conversation). ' +
                'Returns exit_code, stdout and stderr. The `dify-agent` CLI is on PATH (dify-agent config prompt pull/push, dify-agent config manifest). ' +
                `Files a command creates or changes directly in \`${OUTPUTS_DIR}/\` are attached to your answer for the user ` +
                `(at most ${MAX_OUTPUT_FILES} per command, each at most ${caps.outputFileMaxBytes} bytes; no symlinks or directories).`,
              parameters: toolParameters(ShellArgs),
            },
          ],
          call: async (tool, args, ctx): Promise<ToolOutcome> => {
            if (tool !== 'shell') return { kind: 'result', result: `tool not available: ${tool}`, isError: true };
            const parsed = ShellArgs.safeParse(args);
            if (!parsed.success) return { kind: 'result', result: `Invalid arguments: ${formatZodError(parsed.error)}`, isError: true };
            return runner.run({ command: parsed.data.command, timeoutMs: parsed.data.timeout_ms }, ctx);
          },
        },
      };
    },
  });
}

/** A limit that stopped a command, in words the model can act on (issue 27). */
export function limitAdvice(limit: string): string {
  switch (limit) {
    case 'memory':
      return 'the command ran out of memory and was killed: use less memory (smaller inputs, streaming instead of loading everything)';
    case 'procs':
      return 'the command hit the limit on processes running at once: start fewer processes (no fork loops, lower parallelism)';
    case 'cpu':
      return 'the command used up its CPU time and was killed: do less work per command (split it, or use a faster approach)';
    case 'file_size':
      return 'the command tried to write a file larger than allowed and was stopped: write smaller files';
    case 'wall_clock':
      return 'the command exceeded its time limit and was killed: split the work into shorter commands';
    case 'workspace_quota':
      return 'the workspace is over its storage quota and the command was stopped: delete files you no longer need, then retry';
    default:
      return `the command hit a resource limit (${limit}) and was stopped`;
  }
}

/** What the model sees: exit code and output; refusals, time and resource limits as error observations. */
export function shellObservation(r: ShellResult): ToolOutcome {
  if (r.limit && r.limit !== 'wall_clock' && (r.status === 'exited' || r.status === 'killed' || r.status === 'timeout'))
    return {
      kind: 'result',
      result: {
        error: 'limit_exceeded',
        limit: r.limit,
        message: limitAdvice(r.limit),
        ...(r.exitCode !== null ? { exit_code: r.exitCode } : {}),
        stdout: r.stdout,
        stderr: r.stderr,
      },
      isError: true,
    };
  switch (r.status) {
    case 'exited':
      return { kind: 'result', result: { exit_code: r.exitCode, stdout: r.stdout, stderr: r.stderr } };
    case 'timeout':
      return {
        kind: 'result',
        result: {
          error: 'timeout',
          message: r.message ?? 'the command exceeded its time limit and was killed',
          stdout: r.stdout,
          stderr: r.stderr,
        },
        isError: true,
      };
    case 'killed':
      return {
        kind: 'result',
        result: { error: 'killed', message: r.message ?? 'the command was killed', stdout: r.stdout, stderr: r.stderr },
        isError: true,
      };
    default:
      return {
        kind: 'result',
        result: { error: 'shell_unavailable', message: `the shell refused to run the command: ${r.message ?? r.status}` },
        isError: true,
      };
  }
}

/**
 * Attaches what the command wrote to `outputs/` (names from changedOutputs): each file is read once here, through
 * the same checks the api applies, and announced with its sha256 so the api copies exactly this content. The model
 * learns which files were attached and why others were not.
 */
export async function withOutputFiles(
  outcome: ToolOutcome,
  workspaceDir: string,
  names: string[],
  maxBytes: number,
  quota?: OutputQuota,
  /** Called with each attached file's bytes before it is announced (s3: the worker reads it from the bucket). */
  publish?: (bytes: Buffer) => Promise<void>,
): Promise<ToolOutcome> {
  if (outcome.kind !== 'result' || names.length === 0) return outcome;
  const files: NonNullable<Extract<ToolOutcome, { kind: 'result' }>['files']> = [];
  const refused: { file: string; reason: string }[] = [];
  for (const name of names) {
    if (files.length >= MAX_OUTPUT_FILES) {
      refused.push({ file: `${OUTPUTS_DIR}/${name}`, reason: `more than ${MAX_OUTPUT_FILES} files in one command` });
      continue;
    }
    try {
      const bytes = await readOutputFile(workspaceDir, name, maxBytes);
      const over = quota?.refuse(bytes.length);
      if (over) {
        refused.push({ file: `${OUTPUTS_DIR}/${name}`, reason: over });
        continue;
      }
      await publish?.(bytes);
      quota?.take(bytes.length);
      files.push({ url: outputRef(name), name, mime_type: outputFileType(name, bytes).mime, size: bytes.length, sha256: sha256(bytes) });
    } catch (err) {
      if (!(err instanceof OutputRefused)) throw err;
      refused.push({ file: `${OUTPUTS_DIR}/${name}`, reason: err.message });
    }
  }
  const note = {
    ...(files.length ? { attached_files: files.map((f) => `${OUTPUTS_DIR}/${f.name}`) } : {}),
    ...(refused.length ? { not_attached: refused } : {}),
  };
  const result = typeof outcome.result === 'object' && outcome.result !== null ? { ...outcome.result, ...note } : outcome.result;
  return { ...outcome, result, ...(files.length ? { files } : {}) };
}
