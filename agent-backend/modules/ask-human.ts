/**
 * ask_human (docs/PROTOCOL.md §5): a deferred tool. A valid call ends the run with `deferred_tool_call`; the
 * api shows a form and a later run resumes with the human's answer as the tool result. Invalid
 * arguments become observations so the model can retry.
 */
import { z } from 'zod';
import { formatZodError } from '../errors.js';
import { defineModule, type ToolOutcome } from './types.js';
import { toolParameters } from './json-schema.js';

export const ASK_HUMAN_TOOL = 'ask_human';
export const ASK_HUMAN_CAPS = { fields: 16, actions: 8, question: 4000, markdown: 20_000 } as const;
export const ASK_HUMAN_DEFAULTS = { fields: 8, actions: 4, question: 1000, markdown: 8000 } as const;

const AskHumanConfig = z
  .object({
    enabled: z.boolean().default(true),
    max_fields: z.number().int().min(0).max(ASK_HUMAN_CAPS.fields).default(ASK_HUMAN_DEFAULTS.fields),
    max_actions: z.number().int().min(1).max(ASK_HUMAN_CAPS.actions).default(ASK_HUMAN_DEFAULTS.actions),
    max_question_chars: z.number().int().min(1).max(ASK_HUMAN_CAPS.question).default(ASK_HUMAN_DEFAULTS.question),
    max_markdown_chars: z.number().int().min(0).max(ASK_HUMAN_CAPS.markdown).default(ASK_HUMAN_DEFAULTS.markdown),
  })
  .strict();
type AskHumanConfig = z.infer<typeof AskHumanConfig>;

const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function askHumanArgsSchema(c: AskHumanConfig) {
  const base = {
    name: z.string().regex(FIELD_NAME, 'field names must match ^[A-Za-z_][A-Za-z0-9_]*$').max(64),
    label: z.string().min(1).max(200),
    required: z.boolean().default(false),
  };
  const field = z.discriminatedUnion('type', [
    z
      .object({
        type: z.literal('paragraph'),
        ...base,
        placeholder: z.string().max(500).optional(),
        default: z.string().max(4000).optional(),
      })
      .strict(),
    z
      .object({
        type: z.literal('select'),
        ...base,
        options: z
          .array(z.object({ value: z.string().min(1).max(200), label: z.string().min(1).max(200) }).strict())
          .min(1)
          .max(32),
        default: z.string().optional(),
      })
      .strict(),
  ]);
  return z
    .object({
      title: z.string().max(200).optional(),
      question: z.string().min(1).max(c.max_question_chars),
      markdown: z.string().max(c.max_markdown_chars).optional(),
      fields: z.array(field).max(c.max_fields).default([]),
      actions: z
        .array(
          z
            .object({
              id: z.string().regex(FIELD_NAME, 'action ids must match ^[A-Za-z_][A-Za-z0-9_]*$').max(64),
              label: z.string().min(1).max(100),
              style: z.enum(['default', 'primary', 'destructive']).default('default'),
            })
            .strict(),
        )
        .min(1)
        .max(c.max_actions)
        .default([{ id: 'submit', label: 'Submit', style: 'primary' }]),
      urgency: z.enum(['normal', 'high']).default('normal'),
    })
    .strict()
    .superRefine((a, ctx) => {
      const names = new Set<string>();
      a.fields.forEach((f, i) => {
        if (names.has(f.name)) ctx.addIssue({ code: 'custom', path: ['fields', i, 'name'], message: `duplicate field name '${f.name}'` });
        names.add(f.name);
        if (f.type === 'select' && f.default !== undefined && !f.options.some((o) => o.value === f.default)) {
          ctx.addIssue({ code: 'custom', path: ['fields', i, 'default'], message: 'default must be one of the option values' });
        }
      });
      const ids = new Set<string>();
      a.actions.forEach((act, i) => {
        if (ids.has(act.id)) ctx.addIssue({ code: 'custom', path: ['actions', i, 'id'], message: `duplicate action id '${act.id}'` });
        ids.add(act.id);
      });
    });
}

/** The args schema and its JSON Schema per distinct config (a run's layer config; most runs share the default). */
const toolsByConfig = new Map<string, { schema: ReturnType<typeof askHumanArgsSchema>; parameters: Record<string, unknown> }>();

function askHumanTool(c: AskHumanConfig) {
  const key = JSON.stringify(c);
  let t = toolsByConfig.get(key);
  if (!t) {
    const schema = askHumanArgsSchema(c);
    t = { schema, parameters: toolParameters(schema, { io: 'input' }) };
    if (toolsByConfig.size >= 100) toolsByConfig.delete(toolsByConfig.keys().next().value!);
    toolsByConfig.set(key, t);
  }
  return t;
}

export const askHuman = defineModule<AskHumanConfig, Record<string, never>>({
  name: 'ask_human',
  capability: 'toolset',
  description: 'Deferred tool: ask the human a question with a form; the run pauses until answered.',
  configSchema: AskHumanConfig,
  stateSchema: z.object({}).strict() as z.ZodType<Record<string, never>>,
  initialState: () => ({}),
  create: ({ name, config, state }) => {
    const { schema, parameters } = askHumanTool(config);
    return {
      name,
      type: 'ask_human',
      state,
      capability: {
        kind: 'toolset',
        tools: () =>
          config.enabled
            ? [
                {
                  name: ASK_HUMAN_TOOL,
                  description:
                    'Ask the human user a question and wait for the answer (a form with optional fields and action buttons). ' +
                    'Use it when you need a decision, confirmation or missing information. The conversation pauses until they answer.',
                  parameters,
                },
              ]
            : [],
        call: async (_tool, args): Promise<ToolOutcome> => {
          if (!config.enabled) return { kind: 'result', result: 'tool not available: ask_human', isError: true };
          const r = schema.safeParse(args);
          if (!r.success)
            return {
              kind: 'result',
              result: `Invalid arguments: ${formatZodError(r.error)}. Fix them and call ask_human again.`,
              isError: true,
            };
          return { kind: 'deferred', args: r.data as Record<string, unknown>, metadata: { layer: name } };
        },
      },
    };
  },
});
