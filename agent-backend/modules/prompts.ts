/**
 * Instruction modules (system prompt parts) and user prompt modules (the current user content).
 * Instruction ordering across layers is unspecified by the seed; we keep composition order.
 */
import { z } from 'zod';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import { defineModule } from './types.js';

const NoState = z.object({}).strict();

function instructionsModule(name: string, field: 'system_prompt' | 'text', description: string) {
  const configSchema = z.object({ [field]: z.string() }).strict() as z.ZodType<Record<string, string>>;
  return defineModule<Record<string, string>, Record<string, never>>({
    name,
    capability: 'instructions',
    description,
    configSchema,
    stateSchema: NoState as z.ZodType<Record<string, never>>,
    initialState: () => ({}),
    create: ({ name: layerName, config, state }) => ({
      name: layerName,
      type: name,
      state,
      capability: { kind: 'instructions', instructions: () => (config[field].trim() ? config[field] : null) },
    }),
  });
}

export const agentSoulPrompt = instructionsModule(
  'agent_soul_prompt',
  'system_prompt',
  'The Agent Soul system prompt (mentions already expanded).',
);
export const workflowNodeJobPrompt = instructionsModule('workflow_node_job_prompt', 'text', 'The job prompt of a workflow Agent node.');
export const promptModule = instructionsModule('prompt', 'text', 'Convenience: a plain instructions text.');

const TextPromptConfig = z.object({ text: z.string() }).strict();

function textUserPromptModule(name: string, description: string) {
  return defineModule<z.infer<typeof TextPromptConfig>, Record<string, never>>({
    name,
    capability: 'user_prompt',
    description,
    configSchema: TextPromptConfig,
    stateSchema: NoState as z.ZodType<Record<string, never>>,
    initialState: () => ({}),
    create: ({ name: layerName, config, state }) => ({
      name: layerName,
      type: name,
      state,
      capability: { kind: 'user_prompt', userMessage: (): PromptMessage => ({ role: 'user', content: config.text }) },
    }),
  });
}

export const workflowUserPrompt = textUserPromptModule('workflow_user_prompt', 'The user input of a workflow Agent node.');
export const userPromptModule = textUserPromptModule('user_prompt', 'Convenience: a plain user message text.');

export const UserPromptFile = z
  .object({
    type: z.enum(['image', 'document']),
    url: z.string().optional(),
    base64_data: z.string().optional(),
    mime_type: z.string().optional(),
    name: z.string().optional(),
    transfer: z.enum(['native', 'download']).default('download'),
  })
  .strict()
  .refine((f) => Boolean(f.url) !== Boolean(f.base64_data), { message: 'exactly one of url or base64_data is required' });

export const AgentAppUserPromptConfig = z.object({ text: z.string(), files: z.array(UserPromptFile).max(50).default([]) }).strict();
type AgentAppUserPromptConfig = z.infer<typeof AgentAppUserPromptConfig>;

/**
 * The Agent App user turn: images the model can see go native (image content); everything else is
 * described in the text with where to get it (the seed's download fallback; without a shell the
 * model gets the URL).
 */
export const agentAppUserPrompt = defineModule<AgentAppUserPromptConfig, Record<string, never>>({
  name: 'agent_app_user_prompt',
  capability: 'user_prompt',
  description: 'The Agent App user message: text plus files.',
  configSchema: AgentAppUserPromptConfig,
  stateSchema: NoState as z.ZodType<Record<string, never>>,
  initialState: () => ({}),
  create: ({ name, config, state }) => ({
    name,
    type: 'agent_app_user_prompt',
    state,
    capability: {
      kind: 'user_prompt',
      userMessage: (): PromptMessage => {
        const native = config.files.filter((f) => f.type === 'image' && f.transfer === 'native');
        const described = config.files.filter((f) => !(f.type === 'image' && f.transfer === 'native'));
        let text = config.text;
        if (described.length) {
          const lines = described.map((f, i) => {
            const label = f.name ?? `file ${i + 1}`;
            const mime = f.mime_type ? ` (${f.mime_type})` : '';
            const where = f.url ? `: ${f.url}` : ' (inline content, not downloadable here)';
            return `- ${label}${mime}${where}`;
          });
          text += `${text ? '\n\n' : ''}Attached files:\n${lines.join('\n')}`;
        }
        if (!native.length) return { role: 'user', content: text };
        return {
          role: 'user',
          content: [
            { type: 'text', data: text },
            ...native.map((f) => ({
              type: 'image' as const,
              ...(f.url ? { url: f.url } : { base64_data: f.base64_data }),
              ...(f.mime_type ? { mime_type: f.mime_type } : {}),
            })),
          ],
        };
      },
    },
  }),
});
