/**
 * AgentSoulConfig: the versioned agent configuration (docs/seeds/000), stored whole in
 * AgentConfigVersion.config_snapshot and AgentConfigDraft.config.
 */
import { z } from 'zod';
import { ModelSettings } from '../protocol/run.js';
import { BUILTIN_TOOL_NAMES, ProviderName, qualifiedNameProblem, qualifiedToolName, ToolName } from '../protocol/tool-names.js';

/**
 * A tool of a registered tool provider (an API tool from an OpenAPI document, or an MCP server's tool):
 * offered to the model as `<provider>__<name>` (core/protocol/tool-names.ts). Its description and JSON schema come
 * from the provider when the turn is built; the fields here are only kept for configs that carried them.
 */
export const PluginToolRef = z
  .object({
    provider: ProviderName,
    name: ToolName,
    description: z.string().default(''),
    parameters: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
  })
  .strict();

export const AgentSoulConfig = z
  .object({
    prompt: z
      .object({ system_prompt: z.string().max(100_000).default('') })
      .strict()
      .default({ system_prompt: '' }),
    model: z
      .object({
        provider: z.string().min(1),
        model: z.string().min(1),
        model_settings: z.record(z.string(), z.unknown()).default({}),
        context_window: z.number().int().positive().optional(),
      })
      .strict(),
    tools: z
      .object({
        core: z.array(z.enum(BUILTIN_TOOL_NAMES, { error: `builtin tools are ${BUILTIN_TOOL_NAMES.join(', ')}` })).default([]),
        plugin: z.array(PluginToolRef).default([]),
      })
      .strict()
      .default({ core: [], plugin: [] }),
    ask_human: z
      .object({ enabled: z.boolean().default(false) })
      .strict()
      .default({ enabled: false }),
    /**
     * Knowledge (docs/knowledge.md): retrieval over the tenant's datasets runs before the first model request
     * and its results go into the user message; `search_tool` also offers `knowledge_search` to the model.
     */
    knowledge: z
      .object({
        enabled: z.boolean().default(false),
        dataset_ids: z.array(z.uuid()).max(20).default([]),
        top_k: z.number().int().min(1).max(20).default(4),
        /** Chunks scoring below this (0–1, see docs/knowledge.md for the score) are dropped. */
        score_threshold: z.number().min(0).max(1).default(0),
        search_tool: z.boolean().default(true),
      })
      .strict()
      .default({ enabled: false, dataset_ids: [], top_k: 4, score_threshold: 0, search_tool: true }),
    /** The agent's workspace (docs/workspace.md): a Local runtime, and the shell tool inside it. */
    runtime: z
      .object({ enabled: z.boolean().default(false) })
      .strict()
      .default({ enabled: false }),
    shell: z
      .object({
        enabled: z.boolean().default(false),
        /** Per-command time limit (the deployment's SHELL_TIMEOUT_MS caps it). */
        timeout_ms: z.number().int().positive().max(3_600_000).optional(),
        /** Output kept per stream (the deployment's SHELL_MAX_OUTPUT_BYTES caps it). */
        max_output_bytes: z.number().int().positive().max(10_000_000).optional(),
      })
      .strict()
      .default({ enabled: false }),
    history: z
      .object({ max_messages: z.number().int().positive().max(1000).default(100) })
      .strict()
      .default({ max_messages: 100 }),
    features: z
      .object({
        opening_statement: z.string().default(''),
        suggested_questions: z.array(z.string()).default([]),
        /**
         * Dify's "follow-up": after an answer, GET /v1/messages/{id}/suggested asks the agent's model for three questions
         * the user may ask next (core/domain/suggested-questions.ts). Off by default, as in Dify.
         */
        suggested_questions_after_answer: z
          .object({ enabled: z.boolean().default(false) })
          .strict()
          .default({ enabled: false }),
        moderation: z
          .object({
            enabled: z.boolean().default(false),
            keywords: z.array(z.string()).default([]),
            preset_answer: z.string().default('Your message could not be processed.'),
            output_enabled: z.boolean().default(false),
            output_preset_answer: z.string().default('The answer was withheld by content moderation.'),
          })
          .strict()
          .default({
            enabled: false,
            keywords: [],
            preset_answer: 'Your message could not be processed.',
            output_enabled: false,
            output_preset_answer: 'The answer was withheld by content moderation.',
          }),
        file_upload: z
          .object({
            enabled: z.boolean().default(true),
            image_enabled: z.boolean().default(true),
            max_files: z.number().int().min(0).max(20).default(5),
          })
          .strict()
          .default({ enabled: true, image_enabled: true, max_files: 5 }),
        /**
         * Dify's "citation and attribution": a knowledge answer carries the chunks it was given (message_end and
         * GET /v1/messages `retriever_resources`, docs/knowledge.md "Citations"). On by default, as in Dify.
         */
        retriever_resource: z
          .object({ enabled: z.boolean().default(true) })
          .strict()
          .default({ enabled: true }),
      })
      .strict()
      .default({
        opening_statement: '',
        suggested_questions: [],
        suggested_questions_after_answer: { enabled: false },
        moderation: {
          enabled: false,
          keywords: [],
          preset_answer: 'Your message could not be processed.',
          output_enabled: false,
          output_preset_answer: 'The answer was withheld by content moderation.',
        },
        file_upload: { enabled: true, image_enabled: true, max_files: 5 },
        retriever_resource: { enabled: true },
      }),
  })
  .strict()
  .superRefine((soul, ctx) => {
    const seen = new Set<string>();
    soul.tools.plugin.forEach((t, i) => {
      const problem = qualifiedNameProblem(t.provider, t.name);
      if (problem) ctx.addIssue({ code: 'custom', path: ['tools', 'plugin', i, 'name'], message: problem });
      const q = qualifiedToolName(t.provider, t.name);
      if (seen.has(q)) ctx.addIssue({ code: 'custom', path: ['tools', 'plugin', i], message: `the tool ${q} is listed twice` });
      seen.add(q);
    });
    if (new Set(soul.tools.core).size !== soul.tools.core.length) {
      ctx.addIssue({ code: 'custom', path: ['tools', 'core'], message: 'a builtin tool is listed twice' });
    }
    if (soul.knowledge.enabled && soul.knowledge.dataset_ids.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['knowledge', 'dataset_ids'], message: 'knowledge is enabled but no dataset is selected' });
    }
    if (soul.shell.enabled && !soul.runtime.enabled) {
      ctx.addIssue({
        code: 'custom',
        path: ['shell', 'enabled'],
        message: 'the shell runs inside the runtime: enable runtime too (runtime.enabled = true)',
      });
    }
  });
export type AgentSoulConfig = z.output<typeof AgentSoulConfig>;

/** Keeps only the whitelisted model settings (docs/seeds/000); anything else is dropped, never forwarded. */
export function whitelistModelSettings(settings: Record<string, unknown>): z.infer<typeof ModelSettings> {
  const picked: Record<string, unknown> = {};
  for (const key of [
    'temperature',
    'top_p',
    'presence_penalty',
    'frequency_penalty',
    'max_tokens',
    'stop_sequences',
    'thinking_budget',
    'reasoning_effort',
  ]) {
    if (settings[key] !== undefined) picked[key] = settings[key];
  }
  const parsed = ModelSettings.safeParse(picked);
  return parsed.success ? parsed.data : {};
}

/**
 * The demo agent's config: the demo model, or a real model when the deployment hosts one (core/domain/llm/providers
 * demoAgentModel: OPENAI_API_KEY, ANTHROPIC_API_KEY, …; a bare `{model}` is an OpenAI-compatible one).
 */
export function demoSoulConfig(realModel?: { provider?: string; model: string }): AgentSoulConfig {
  return AgentSoulConfig.parse({
    prompt: { system_prompt: 'You are a helpful demo agent. Answer briefly and remember what the user told you.' },
    model: realModel
      ? { provider: realModel.provider ?? 'openai_compatible', model: realModel.model, model_settings: { temperature: 0.2 } }
      : { provider: 'demo', model: 'demo-chat', model_settings: { temperature: 0 } },
    tools: { core: ['current_time', 'calculator', 'scratchpad_set', 'scratchpad_get'], plugin: [] },
    ask_human: { enabled: true },
    features: {
      opening_statement: 'Hi! I am the demo agent. Try "/calc 6*7" or "/ask What is your name?".',
      suggested_questions: realModel ? [] : ['/calc 6*7', '/ask What should I call you?', 'Hello! My name is Ada.'],
    },
  });
}
