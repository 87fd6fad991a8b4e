/**
 * Toolsets: `core_tools` (the builtin shelf, core/domain/tools/builtin: the scratchpad's state lives in the layer
 * state, so it travels in the session snapshot; http_request reaches the network through the SSRF guard) and `tools` (plugin tools through a pluggable resolver). Tool errors become
 * observations (`isError`), never run failures.
 */
import { z } from 'zod';
import { formatZodError } from '../errors.js';
import { CalculatorError, evaluate } from './calculator.js';
import { BUILTIN_TOOL_NAMES, qualifiedToolName, type BuiltinToolName } from '../../core/protocol/tool-names.js';
import {
  defineModule,
  Mutex,
  ToolErrorResult,
  ToolNotAvailableError,
  type ToolCallContext,
  type ToolOutcome,
  type ToolSpec,
} from './types.js';
import type { Logger } from '../../core/platform/logger.js';
import { createGuardedFetch, type FetchLike } from '../../core/platform/net/ssrf.js';
import {
  BUILTIN_TOOLS,
  builtinParameters,
  type CodeArgs,
  type CurrentTimeArgs,
  type HttpRequestArgs,
  type JsonQueryArgs,
  type TextArgs,
} from '../../core/protocol/builtin-tools.js';
import type { BuiltinOutcome } from './builtins/outcome.js';
import { currentTime } from './builtins/current-time.js';
import { httpRequest } from './builtins/http-request.js';
import { jsonQuery } from './builtins/json-query.js';
import { textTool } from './builtins/text.js';
import { runCode } from './builtins/code.js';
import { SHELL_RUNNER, type ShellRunner } from './context.js';

const fail = (message: string): ToolOutcome => ({ kind: 'result', result: message, isError: true });

// ---- core_tools ------------------------------------------------------------------------------

export { BUILTIN_TOOL_NAMES, type BuiltinToolName };

const CoreToolsConfig = z.object({ tools: z.array(z.enum(BUILTIN_TOOL_NAMES)).default([]) }).strict();
export const CoreToolsState = z.object({ scratchpad: z.record(z.string(), z.string()).default({}) }).strict();
type CoreToolsState = z.infer<typeof CoreToolsState>;
const MAX_SCRATCHPAD_KEYS = 100;

/** What the shelf's tools may use: the network (http_request) and the deployment's tool limits. */
export interface BuiltinToolDeps {
  /** The SSRF-guarded fetch (HTTP_REQUEST_ALLOW_PRIVATE_NETWORK decides what it may reach). */
  fetch: FetchLike;
  /** TOOL_TIMEOUT_MS: one call of http_request or json_query. */
  timeoutMs: number;
  /** TOOL_MAX_RESPONSE_BYTES: what a tool may return. */
  maxResponseBytes: number;
  logger?: Logger;
}

/** Public addresses only, the api's defaults: what a registry built without the deployment's config gets. */
export const defaultBuiltinDeps = (): BuiltinToolDeps => ({ fetch: createGuardedFetch({}), timeoutMs: 15_000, maxResponseBytes: 65_536 });

function parseArgs<T>(schema: z.ZodType<T>, args: unknown): { ok: true; value: T } | { ok: false; outcome: ToolOutcome } {
  const r = schema.safeParse(args);
  return r.success ? { ok: true, value: r.data } : { ok: false, outcome: fail(`Invalid arguments: ${formatZodError(r.error)}`) };
}

const observation = (o: BuiltinOutcome): ToolOutcome => ({ kind: 'result', result: o.result, ...(o.isError ? { isError: true } : {}) });

export function createCoreTools(deps: BuiltinToolDeps = defaultBuiltinDeps()) {
  return defineModule<z.infer<typeof CoreToolsConfig>, CoreToolsState>({
    name: 'core_tools',
    capability: 'toolset',
    description: `Builtin tools (the shelf of docs/tools.md): ${BUILTIN_TOOL_NAMES.join(', ')}.`,
    configSchema: CoreToolsConfig,
    stateSchema: CoreToolsState,
    initialState: () => ({ scratchpad: {} }),
    create: ({ name, config, state, services }) => {
      const mutex = new Mutex();
      const enabled = new Set<string>(config.tools);
      const instance = {
        name,
        type: 'core_tools',
        state: state as unknown,
        capability: {
          kind: 'toolset' as const,
          tools: (): ToolSpec[] =>
            config.tools.map((t) => ({ name: t, description: BUILTIN_TOOLS[t].description, parameters: builtinParameters(t) })),
          call: async (tool: string, args: unknown, ctx: ToolCallContext): Promise<ToolOutcome> => {
            if (!enabled.has(tool)) return fail(`tool not available: ${tool}`);
            const a = parseArgs(BUILTIN_TOOLS[tool as BuiltinToolName].args, args);
            if (!a.ok) return a.outcome;
            switch (tool as BuiltinToolName) {
              // Stateless tools run side by side (an http_request does not hold up a calculation).
              case 'current_time':
                return observation(currentTime(a.value as CurrentTimeArgs));
              case 'http_request': {
                const v = a.value as HttpRequestArgs;
                const started = Date.now();
                const out = await httpRequest(deps, v, ctx.signal);
                // Host, method and outcome only: paths, queries, headers and bodies may carry what the user typed.
                const status = typeof out.result === 'object' ? (out.result as { status?: number }).status : undefined;
                deps.logger?.info(
                  { tool, host: hostOf(v.url), method: v.method ?? 'GET', status, is_error: out.isError, ms: Date.now() - started },
                  'builtin tool call',
                );
                return observation(out);
              }
              case 'json_query':
                return observation(
                  await jsonQuery(
                    { timeoutMs: deps.timeoutMs, maxResultBytes: deps.maxResponseBytes },
                    a.value as JsonQueryArgs,
                    ctx.signal,
                  ),
                );
              case 'text':
                return observation(textTool({ maxResultBytes: deps.maxResponseBytes }, a.value as TextArgs));
              // In the run's shell (its sandbox, limits and queue), found when called: the shell layer enters after this one.
              case 'code':
                return runCode(services.resources.get<ShellRunner>(SHELL_RUNNER), a.value as CodeArgs, ctx);
              case 'calculator': {
                const expression = (a.value as { expression: string }).expression;
                try {
                  return { kind: 'result', result: { expression, result: evaluate(expression) } };
                } catch (err) {
                  if (err instanceof CalculatorError) return fail(`Cannot evaluate: ${err.message}`);
                  throw err;
                }
              }
              // Serialized: scratchpad calls read and write the layer state.
              case 'scratchpad_set':
                return mutex.run(async () => {
                  const { key, value } = a.value as { key: string; value: string };
                  const current = instance.state as CoreToolsState;
                  if (!(key in current.scratchpad) && Object.keys(current.scratchpad).length >= MAX_SCRATCHPAD_KEYS) {
                    return fail(`scratchpad is full (${MAX_SCRATCHPAD_KEYS} keys)`);
                  }
                  // Explicit write-back of a new state object (state is never mutated in place).
                  instance.state = { scratchpad: { ...current.scratchpad, [key]: value } } satisfies CoreToolsState;
                  return { kind: 'result', result: { saved: key } };
                });
              case 'scratchpad_get':
                return mutex.run(async () => {
                  const { key } = a.value as { key: string };
                  const pad = (instance.state as CoreToolsState).scratchpad;
                  if (!(key in pad)) {
                    const keys = Object.keys(pad);
                    return fail(`no note saved under '${key}'${keys.length ? `; saved keys: ${keys.join(', ')}` : ''}`);
                  }
                  return { kind: 'result', result: { key, value: pad[key] } };
                });
              default:
                return fail(`tool not available: ${tool}`);
            }
          },
        },
      };
      return instance;
    },
  });
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}

export const coreTools = createCoreTools();

// ---- tools (plugin tools) --------------------------------------------------------------------

const PluginToolConfig = z
  .object({
    provider: z.string().min(1),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'tool names may contain letters, digits, _ and - (max 64)'),
    description: z.string().default(''),
    parameters: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
  })
  .strict();
const PluginToolsConfig = z
  .object({
    tools: z.array(PluginToolConfig).max(128).default([]),
    /** The execution_context layer whose signed context scopes the calls (the api checks it, docs/tools.md). */
    execution_context: z.string().min(1).optional(),
  })
  .strict();

export const pluginTools = defineModule<z.infer<typeof PluginToolsConfig>, Record<string, never>>({
  name: 'tools',
  capability: 'toolset',
  description:
    'Tools of registered tool providers (API, MCP), offered as <provider>__<tool> and invoked through the deployment’s tool resolver.',
  configSchema: PluginToolsConfig,
  stateSchema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  initialState: () => ({}),
  references: (c) =>
    c.execution_context ? [{ field: 'execution_context', layer: c.execution_context, types: ['execution_context'] }] : [],
  create: ({ name, config, state, services }) => {
    // One naming scheme (core/protocol/tool-names.ts): the model sees `<provider>__<tool>`.
    const byName = new Map(config.tools.map((t) => [qualifiedToolName(t.provider, t.name), t]));
    return {
      name,
      type: 'tools',
      state,
      capability: {
        kind: 'toolset',
        tools: () =>
          config.tools.map((t) => ({ name: qualifiedToolName(t.provider, t.name), description: t.description, parameters: t.parameters })),
        call: async (tool, args, ctx) => {
          const def = byName.get(tool);
          if (!def) return fail(`tool not available: ${tool}`);
          try {
            return {
              kind: 'result',
              result: await services.toolResolver.invoke({ provider: def.provider, name: def.name, args, context: ctx }),
            };
          } catch (err) {
            if (err instanceof ToolNotAvailableError || err instanceof ToolErrorResult) return fail(err.message);
            return fail(`tool ${def.provider}/${def.name} failed: ${(err as Error)?.message ?? String(err)}`);
          }
        },
      },
    };
  },
});
