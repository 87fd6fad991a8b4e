/**
 * Toolsets: `core_tools` (builtins whose state lives in the layer state, so the scratchpad travels in
 * the session snapshot) and `tools` (plugin tools through a pluggable resolver). Tool errors become
 * observations (`isError`), never run failures.
 */
import { z } from 'zod';
import { formatZodError } from '../errors.js';
import { CalculatorError, evaluate } from './calculator.js';
import { BUILTIN_TOOL_NAMES, qualifiedToolName, type BuiltinToolName } from '../../core/protocol/tool-names.js';
import { defineModule, Mutex, ToolErrorResult, ToolNotAvailableError, type ToolOutcome, type ToolSpec } from './types.js';
import { toolParameters } from './json-schema.js';

const fail = (message: string): ToolOutcome => ({ kind: 'result', result: message, isError: true });

// ---- core_tools ------------------------------------------------------------------------------

const CurrentTimeArgs = z.object({ timezone: z.string().optional().describe('IANA time zone, e.g. Europe/Berlin; default UTC') }).strict();
const CalculatorArgs = z.object({ expression: z.string().describe('Arithmetic expression, e.g. (2 + 3) * 4 ^ 2 / sqrt(16)') }).strict();
const ScratchpadSetArgs = z
  .object({ key: z.string().min(1).max(100).describe('Note name'), value: z.string().max(10_000).describe('Text to remember') })
  .strict();
const ScratchpadGetArgs = z.object({ key: z.string().min(1).max(100).describe('Note name') }).strict();

export { BUILTIN_TOOL_NAMES, type BuiltinToolName };

const CoreToolsConfig = z.object({ tools: z.array(z.enum(BUILTIN_TOOL_NAMES)).default([]) }).strict();
export const CoreToolsState = z.object({ scratchpad: z.record(z.string(), z.string()).default({}) }).strict();
type CoreToolsState = z.infer<typeof CoreToolsState>;
const MAX_SCRATCHPAD_KEYS = 100;

const BUILTIN_SPECS: Record<BuiltinToolName, { description: string; args: z.ZodType }> = {
  current_time: { description: 'Current date and time (ISO 8601 and human readable) in a time zone.', args: CurrentTimeArgs },
  calculator: { description: 'Evaluate an arithmetic expression exactly as written and return the number.', args: CalculatorArgs },
  scratchpad_set: { description: 'Remember a short note under a key for later turns of this conversation.', args: ScratchpadSetArgs },
  scratchpad_get: { description: 'Read a note saved earlier with scratchpad_set.', args: ScratchpadGetArgs },
};

function parseArgs<T>(schema: z.ZodType<T>, args: unknown): { ok: true; value: T } | { ok: false; outcome: ToolOutcome } {
  const r = schema.safeParse(args);
  return r.success ? { ok: true, value: r.data } : { ok: false, outcome: fail(`Invalid arguments: ${formatZodError(r.error)}`) };
}

export const coreTools = defineModule<z.infer<typeof CoreToolsConfig>, CoreToolsState>({
  name: 'core_tools',
  capability: 'toolset',
  description: 'Builtin tools: current_time, calculator, scratchpad_set, scratchpad_get.',
  configSchema: CoreToolsConfig,
  stateSchema: CoreToolsState,
  initialState: () => ({ scratchpad: {} }),
  create: ({ name, config, state }) => {
    const mutex = new Mutex();
    const enabled = new Set<string>(config.tools);
    const instance = {
      name,
      type: 'core_tools',
      state: state as unknown,
      capability: {
        kind: 'toolset' as const,
        tools: (): ToolSpec[] =>
          config.tools.map((t) => ({
            name: t,
            description: BUILTIN_SPECS[t].description,
            parameters: toolParameters(BUILTIN_SPECS[t].args),
          })),
        // Serialized: scratchpad calls read and write the layer state.
        call: (tool: string, args: unknown): Promise<ToolOutcome> =>
          mutex.run(async () => {
            if (!enabled.has(tool)) return fail(`tool not available: ${tool}`);
            switch (tool as BuiltinToolName) {
              case 'current_time': {
                const a = parseArgs(CurrentTimeArgs, args);
                if (!a.ok) return a.outcome;
                const timezone = a.value.timezone ?? 'UTC';
                try {
                  const now = new Date();
                  const formatted = new Intl.DateTimeFormat('en-US', { dateStyle: 'full', timeStyle: 'long', timeZone: timezone }).format(
                    now,
                  );
                  return { kind: 'result', result: { iso: now.toISOString(), timezone, formatted } };
                } catch {
                  return fail(`unknown time zone: ${timezone}`);
                }
              }
              case 'calculator': {
                const a = parseArgs(CalculatorArgs, args);
                if (!a.ok) return a.outcome;
                try {
                  return { kind: 'result', result: { expression: a.value.expression, result: evaluate(a.value.expression) } };
                } catch (err) {
                  if (err instanceof CalculatorError) return fail(`Cannot evaluate: ${err.message}`);
                  throw err;
                }
              }
              case 'scratchpad_set': {
                const a = parseArgs(ScratchpadSetArgs, args);
                if (!a.ok) return a.outcome;
                const current = instance.state as CoreToolsState;
                if (!(a.value.key in current.scratchpad) && Object.keys(current.scratchpad).length >= MAX_SCRATCHPAD_KEYS) {
                  return fail(`scratchpad is full (${MAX_SCRATCHPAD_KEYS} keys)`);
                }
                // Explicit write-back of a new state object (state is never mutated in place).
                instance.state = { scratchpad: { ...current.scratchpad, [a.value.key]: a.value.value } } satisfies CoreToolsState;
                return { kind: 'result', result: { saved: a.value.key } };
              }
              case 'scratchpad_get': {
                const a = parseArgs(ScratchpadGetArgs, args);
                if (!a.ok) return a.outcome;
                const pad = (instance.state as CoreToolsState).scratchpad;
                if (!(a.value.key in pad)) {
                  const keys = Object.keys(pad);
                  return fail(`no note saved under '${a.value.key}'${keys.length ? `; saved keys: ${keys.join(', ')}` : ''}`);
                }
                return { kind: 'result', result: { key: a.value.key, value: pad[a.value.key] } };
              }
              default:
                return fail(`tool not available: ${tool}`);
            }
          }),
      },
    };
    return instance;
  },
});

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
