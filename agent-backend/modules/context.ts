/** execution_context, llm, output and config modules: one capability each, small configs. */
import { z } from 'zod';
import { ExecutionContextLayerConfig, LlmLayerConfig } from '../../core/protocol/run.js';
import { defineModule } from './types.js';

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

function unavailableModule(name: string, description: string) {
  return defineModule<Record<string, unknown>, Record<string, unknown>>({
    name,
    capability: 'resource',
    description,
    configSchema: z.record(z.string(), z.unknown()),
    stateSchema: z.record(z.string(), z.unknown()),
    initialState: () => ({}),
    unavailable: `module ${name} is not available in this deployment yet`,
    create: () => {
      throw new Error(`module ${name} is not available in this deployment yet`);
    },
  });
}

export const runtime = unavailableModule('runtime', 'Sandbox runtime (local/remote) for shell sessions.');
export const shell = unavailableModule('shell', 'Shell sessions inside the runtime.');
export const knowledge = unavailableModule('knowledge', 'Knowledge base retrieval.');
