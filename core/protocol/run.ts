/**
 * Agent backend run protocol (docs/PROTOCOL.md §2): the one set of schemas shared by the api (client)
 * and the reference agent backend (server). Unknown request fields are rejected (`.strict()`), and
 * nothing in a run request can carry model credentials.
 */
import { z } from 'zod';

export const LAYER_NAME_RE = /^[a-z][a-z0-9_]*$/;

export const LayerSpec = z
  .object({
    /** Instance name (an alias may reuse a module under another name). */
    name: z.string().regex(LAYER_NAME_RE),
    /** Registered module name (never an import path). */
    type: z.string().regex(LAYER_NAME_RE),
    deps: z.array(z.string()).default([]),
    metadata: z.record(z.string(), z.unknown()).default({}),
    config: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();
export type LayerSpec = z.infer<typeof LayerSpec>;

export const Composition = z
  .object({
    schema_version: z.literal(1),
    layers: z.array(LayerSpec).min(1).max(64),
  })
  .strict();
export type Composition = z.infer<typeof Composition>;

export const LifecycleState = z.enum(['new', 'suspended', 'closed']);

export const SessionSnapshot = z
  .object({
    schema_version: z.literal(1),
    layers: z.array(
      z
        .object({
          name: z.string(),
          lifecycle_state: LifecycleState,
          runtime_state: z.record(z.string(), z.unknown()).default({}),
        })
        .strict(),
    ),
  })
  .strict();
export type SessionSnapshot = z.infer<typeof SessionSnapshot>;

/** Result handed to a deferred tool call (ask_human) when a run resumes. */
export const DeferredToolResult = z.union([
  z
    .object({
      status: z.literal('submitted'),
      action: z.object({ id: z.string(), label: z.string() }).strict(),
      values: z.record(z.string(), z.unknown()),
      rendered_content: z.string(),
    })
    .strict(),
  z.object({ status: z.literal('timeout') }).strict(),
  z.object({ status: z.literal('unavailable') }).strict(),
]);
export type DeferredToolResult = z.infer<typeof DeferredToolResult>;

export const CreateRunRequest = z
  .object({
    composition: Composition,
    purpose: z.enum(['agent_app', 'workflow_node', 'build']).default('agent_app'),
    idempotency_key: z.string().min(1).max(200).optional(),
    metadata: z.record(z.string(), z.unknown()).default({}),
    session_snapshot: SessionSnapshot.nullable().optional(),
    deferred_tool_results: z
      .object({ calls: z.record(z.string(), DeferredToolResult) })
      .strict()
      .nullable()
      .optional(),
    on_exit: z
      .object({ default: z.enum(['suspend', 'delete']) })
      .strict()
      .default({ default: 'suspend' }),
  })
  .strict();
export type CreateRunRequest = z.input<typeof CreateRunRequest>;
export type CreateRunRequestParsed = z.output<typeof CreateRunRequest>;

export const RunStatus = z.enum(['running', 'succeeded', 'failed', 'cancelled']);
export type RunStatus = z.infer<typeof RunStatus>;

export const CreateRunResponse = z.object({ run_id: z.string(), status: RunStatus });

export const RunStatusResponse = z.object({
  run_id: z.string(),
  status: RunStatus,
  created_at: z.string(),
  updated_at: z.string(),
  error: z.string().nullable(),
  error_type: z.string().nullable(),
});

export const CancelRunRequest = z.object({ reason: z.string().max(200).optional(), message: z.string().max(2000).optional() }).strict();

/** Usage carried by every terminal event (and summed per message by the api). */
export const Usage = z.object({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
  /** Of prompt_tokens, read from the provider's prompt cache (priced at the model's cached-input price). */
  prompt_cached_tokens: z.number().int().nonnegative().optional(),
  /** Of completion_tokens, spent on reasoning. */
  reasoning_tokens: z.number().int().nonnegative().optional(),
  prompt_unit_price: z.string().default('0'),
  prompt_price_unit: z.string().default('0.000001'),
  prompt_price: z.string().default('0'),
  completion_unit_price: z.string().default('0'),
  completion_price_unit: z.string().default('0.000001'),
  completion_price: z.string().default('0'),
  total_price: z.string().default('0'),
  currency: z.string().default('USD'),
  /** Seconds, wall clock of the run. */
  latency: z.number().nonnegative().default(0),
  /** Seconds until the first model token. */
  time_to_first_token: z.number().nonnegative().nullable().default(null),
  /** Seconds from the first model token to the end (Dify's time_to_generate); null before any token. */
  time_to_generate: z.number().nonnegative().nullable().optional(),
  model_requests: z.number().int().nonnegative().default(0),
  tool_calls: z.number().int().nonnegative().default(0),
  /** Some token counts are estimated with a tokenizer (a model call cut by a stop, or one reporting none). */
  estimated: z.boolean().optional(),
});
export type Usage = z.infer<typeof Usage>;

export function emptyUsage(): Usage {
  return Usage.parse({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
}

// ---- events ----------------------------------------------------------------------------------

export const PartKind = z.enum(['text', 'thinking', 'tool-call', 'tool-return']);

export const Part = z.object({
  part_kind: PartKind,
  content: z.unknown().optional(),
  tool_name: z.string().optional(),
  tool_call_id: z.string().optional(),
  args: z.unknown().optional(),
});

export const PartDelta = z.object({
  part_delta_kind: z.enum(['text', 'thinking', 'tool_call']),
  content_delta: z.string().optional(),
  args_delta: z.string().optional(),
  tool_name_delta: z.string().optional(),
  tool_call_id: z.string().optional(),
});

/** One model request's usage (a `model_response` event); prices are decimal strings like the run's usage. */
export const ModelCallUsage = z.object({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_price: z.string().regex(/^\d+(\.\d+)?$/),
  currency: z.string().default('USD'),
  /** Seconds from the request to the end of its response stream. */
  latency: z.number().nonnegative(),
});
export type ModelCallUsage = z.infer<typeof ModelCallUsage>;

/** pydantic-ai style agent stream event (docs/seeds/001 / docs/PROTOCOL.md §2). */
export const AgentStreamEvent = z.object({
  event_kind: z.enum([
    'part_start',
    'part_delta',
    'part_end',
    'function_tool_call',
    'function_tool_result',
    'output_tool_call',
    'output_tool_result',
    'final_result',
    // Not pydantic-ai: after each model request, its usage (issue 18: per-iteration tokens, price, latency).
    'model_response',
  ]),
  index: z.number().int().nonnegative().optional(),
  part: Part.optional(),
  delta: PartDelta.optional(),
  tool_call_id: z.string().optional(),
  tool_name: z.string().optional(),
  args: z.unknown().optional(),
  /** function_tool_result: the observation (JSON value or text). */
  result: z.unknown().optional(),
  is_error: z.boolean().optional(),
  /** function_tool_result: how long the tool ran, ms. */
  duration_ms: z.number().nonnegative().optional(),
  /** model_response: the run's 0-based model request number and what that request used. */
  call_index: z.number().int().nonnegative().optional(),
  usage: ModelCallUsage.optional(),
  /**
   * model_response: the request's prompt was fitted into the model's context window, leaving out the oldest turns
   * (docs/ARCHITECTURE "History"): how many messages and turns, our token count of what was sent and its budget.
   */
  history_trimmed: z
    .object({
      dropped_messages: z.number().int().positive(),
      dropped_turns: z.number().int().nonnegative(),
      prompt_tokens: z.number().int().nonnegative(),
      budget_tokens: z.number().int().nonnegative(),
      context_window: z.number().int().positive(),
    })
    .optional(),
  /** Files a tool produced, surfaced as message files. */
  files: z
    .array(
      z.object({
        /** `workspace:outputs/<name>`: a file in the run's workspace (the api copies it into uploads). */
        url: z.string(),
        mime_type: z.string().optional(),
        name: z.string().optional(),
        size: z.number().int().nonnegative().optional(),
        /** sha256 (hex) of the content the tool produced: the api attaches only that content. */
        sha256: z.string().optional(),
      }),
    )
    .optional(),
});
export type AgentStreamEvent = z.infer<typeof AgentStreamEvent>;

export const DeferredToolCall = z.object({
  tool_call_id: z.string(),
  tool_name: z.string(),
  args: z.record(z.string(), z.unknown()),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type DeferredToolCall = z.infer<typeof DeferredToolCall>;

export const RunStartedData = z.object({}).passthrough();
export const AgentMessageDeltaData = z.object({ delta: z.string() });
export const RunSucceededData = z.union([
  z.object({ session_snapshot: SessionSnapshot, usage: Usage, output: z.string(), deferred_tool_call: z.undefined().optional() }),
  z.object({ session_snapshot: SessionSnapshot, usage: Usage, deferred_tool_call: DeferredToolCall, output: z.string().optional() }),
]);
export const RunFailedData = z.object({
  error: z.string(),
  error_type: z.string().nullable().optional(),
  reason: z.string().nullable().optional(),
  session_snapshot: SessionSnapshot.nullable().optional(),
  usage: Usage.nullable().optional(),
  /** Partial answer text produced before the failure. */
  output: z.string().optional(),
});
export const RunCancelledData = z.object({
  reason: z.string().nullable().optional(),
  message: z.string().nullable().optional(),
  session_snapshot: SessionSnapshot.nullable().optional(),
  usage: Usage.nullable().optional(),
  output: z.string().optional(),
});

const envelope = {
  /** Ordered per run; decimal sequence numbers as strings ("1", "2", ...). Used as the cursor. */
  id: z.string(),
  run_id: z.string(),
  created_at: z.string(),
};

export const RunEvent = z.discriminatedUnion('type', [
  z.object({ ...envelope, type: z.literal('run_started'), data: RunStartedData }),
  z.object({ ...envelope, type: z.literal('pydantic_ai_event'), data: AgentStreamEvent }),
  z.object({ ...envelope, type: z.literal('agent_message_delta'), data: AgentMessageDeltaData }),
  z.object({ ...envelope, type: z.literal('run_succeeded'), data: RunSucceededData }),
  z.object({ ...envelope, type: z.literal('run_failed'), data: RunFailedData }),
  z.object({ ...envelope, type: z.literal('run_cancelled'), data: RunCancelledData }),
]);
export type RunEvent = z.infer<typeof RunEvent>;
export type RunEventType = RunEvent['type'];
export const TERMINAL_EVENT_TYPES = ['run_succeeded', 'run_failed', 'run_cancelled'] as const;
export function isTerminal(e: { type: string }): boolean {
  return (TERMINAL_EVENT_TYPES as readonly string[]).includes(e.type);
}

export const EventsPage = z.object({
  run_id: z.string(),
  events: z.array(RunEvent),
  next_cursor: z.string().nullable(),
});

/** Model settings the api may pass to the backend (docs/seeds/000's whitelist): exactly these keys. */
export const ModelSettings = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    max_tokens: z.number().int().positive().optional(),
    stop_sequences: z.array(z.string()).max(8).optional(),
    /**
     * Tokens a reasoning model may think before it answers: Anthropic's extended thinking (`budget_tokens`, at least
     * 1 024), Gemini's `thinkingBudget`, Bedrock's `reasoningConfig` (Claude on Bedrock). Ignored by other models.
     */
    thinking_budget: z.number().int().positive().max(1_000_000).optional(),
    /** How hard an OpenAI/Azure reasoning model thinks (`reasoning_effort`). Ignored by other models. */
    reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).optional(),
  })
  .strict();
export type ModelSettings = z.infer<typeof ModelSettings>;

/** Layer configs the api builds for an Agent App (docs/PROTOCOL.md §2). Field names shared with the backend. */
export const LlmLayerConfig = z
  .object({
    provider: z.string(),
    model: z.string(),
    model_settings: ModelSettings.default({}),
    /**
     * Tokens the model reads at most: the catalogue's window for the tenant (overrides and declared models included),
     * or the agent config's smaller one. The backend fits each call's prompt into it (docs/ARCHITECTURE "History").
     */
    context_window: z.number().int().positive().optional(),
    /** The model's max output tokens (catalogue): reserved out of the window when model_settings.max_tokens is unset. */
    max_output: z.number().int().positive().optional(),
    /**
     * The tenant's unit prices for this model (currency per 1M tokens, as the gateway meters it): the backend prices
     * a call cut before it reported usage with these. Absent: the built-in catalogue's.
     */
    prices: z
      .object({
        input: z.string().regex(/^\d+(\.\d+)?$/),
        output: z.string().regex(/^\d+(\.\d+)?$/),
        cached_input: z
          .string()
          .regex(/^\d+(\.\d+)?$/)
          .optional(),
        currency: z.string().min(1),
      })
      .strict()
      .optional(),
    /** Name of the execution_context layer this layer's callbacks are scoped by. */
    execution_context: z.string().default('execution_context'),
  })
  .strict();

/** Where a turn was started from (Dify's InvokeFrom). */
export const InvokeFrom = z.enum(['service-api', 'web-app', 'debugger', 'explore']);
export type InvokeFrom = z.infer<typeof InvokeFrom>;

export const ExecutionContextLayerConfig = z
  .object({
    tenant_id: z.string(),
    user_id: z.string(),
    user_from: z.enum(['end-user', 'account']).default('end-user'),
    app_id: z.string(),
    conversation_id: z.string().nullable(),
    message_id: z.string().nullable().optional(),
    agent_id: z.string(),
    agent_config_version_id: z.string().nullable(),
    invoke_from: InvokeFrom,
    trace_id: z.string().optional(),
    /** The binding's workspace, when the run has a runtime layer: the backend admits that workspace only (signed; issue 27). */
    workspace_id: z.string().optional(),
    /** Expiry, unix seconds (signed; issue 17 L2). */
    exp: z.number().int().optional(),
    /** HMAC over the context by the api; lets the stub prove scope to the inner API. */
    signature: z.string().optional(),
  })
  .strict();
export type ExecutionContextLayerConfig = z.infer<typeof ExecutionContextLayerConfig>;
