/**
 * Inner LLM invoke (docs/PROTOCOL.md §3): the agent backend calls back into the api for every model call.
 * The api owns credentials, metering and credits; the backend only names provider + model.
 */
import { z } from 'zod';
import { ExecutionContextLayerConfig, Usage } from './run.js';

export const TextContent = z.object({ type: z.literal('text'), data: z.string() }).strict();
export const ImageContent = z
  .object({ type: z.literal('image'), url: z.string().optional(), base64_data: z.string().optional(), mime_type: z.string().optional() })
  .strict();
export const PromptContent = z.union([z.string(), z.array(z.discriminatedUnion('type', [TextContent, ImageContent]))]);

/**
 * What a provider requires back unchanged on the next request, per part of a model's answer, keyed by provider (the
 * AI SDK's `providerMetadata` on a streamed part, its `providerOptions` on a prompt part): Anthropic's thinking
 * `signature` and a redacted block's `redactedData` (also Claude on Bedrock), Gemini's `thoughtSignature`, OpenAI
 * Responses' reasoning `itemId` and `reasoningEncryptedContent` (`store: false`). Opaque to the backend: kept in the
 * session snapshot's history and sent back as it came (docs/models.md "Provider metadata that must round-trip").
 */
export const ProviderMetadata = z.record(z.string().min(1).max(64), z.record(z.string().min(1).max(128), z.json()));
export type ProviderMetadata = z.infer<typeof ProviderMetadata>;

/**
 * One reasoning block of an answer, whole: an Anthropic `thinking` (text + signature) or `redacted_thinking` (empty
 * text + redactedData) block, a Gemini thought, an OpenAI reasoning item's summary part (with its encrypted content).
 * In order; an empty text is kept (a redacted block, an OpenAI item without a summary).
 */
export const ReasoningPart = z.object({ text: z.string(), provider_metadata: ProviderMetadata.optional() }).strict();
export type ReasoningPart = z.infer<typeof ReasoningPart>;

export const ToolCall = z
  .object({
    id: z.string(),
    type: z.literal('function').default('function'),
    function: z.object({ name: z.string(), arguments: z.string() }).strict(),
    /** The call's provider metadata (Gemini's `thoughtSignature` on a functionCall, OpenAI's function_call item id). */
    provider_metadata: ProviderMetadata.optional(),
  })
  .strict();
export type ToolCall = z.infer<typeof ToolCall>;

export const PromptMessage = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }).strict(),
  z.object({ role: z.literal('user'), content: PromptContent }).strict(),
  z
    .object({
      role: z.literal('assistant'),
      content: z.string().default(''),
      /** All reasoning text (Dify's field; what is shown). */
      reasoning_content: z.string().optional(),
      /** The same reasoning as the provider's blocks with their metadata: when present, what is sent back. */
      reasoning_parts: z.array(ReasoningPart).optional(),
      /** Provider metadata of the answer text (Gemini's `thoughtSignature` on its last text part). */
      content_provider_metadata: ProviderMetadata.optional(),
      tool_calls: z.array(ToolCall).optional(),
    })
    .strict(),
  z.object({ role: z.literal('tool'), content: z.string(), tool_call_id: z.string(), name: z.string().optional() }).strict(),
]);
export type PromptMessage = z.infer<typeof PromptMessage>;

export const ToolDefinition = z
  .object({ name: z.string(), description: z.string().default(''), parameters: z.record(z.string(), z.unknown()) })
  .strict();
export type ToolDefinition = z.infer<typeof ToolDefinition>;

export const InvokeCaller = z
  .object({
    invocation_id: z.string().min(1).max(200),
    agent_run_id: z.string().min(1).max(200),
    call_index: z.number().int().nonnegative(),
    tenant_id: z.string().min(1),
    user_id: z.string().min(1),
    user_from: z.enum(['end-user', 'account']),
    app_id: z.string().min(1),
    /** The agent the run is for (from the execution context); the api checks it is the app's agent (issue 17). */
    agent_id: z.string().min(1).optional(),
    invoke_from: z.string().min(1),
    agent_mode: z.string().default('agent'),
  })
  .strict();

export const InvokeTarget = z
  .object({
    provider: z.string().min(1),
    model: z.string().min(1),
    prompt_messages: z.array(PromptMessage).min(1),
    tools: z.array(ToolDefinition).optional(),
    model_parameters: z.record(z.string(), z.unknown()).default({}),
    stream: z.boolean().default(true),
  })
  .strict();

/**
 * `execution_context`: the run's signed execution context layer config, as the api built it (issue 28). The api
 * derives tenant, app, user and agent from it alone (403 `execution_context_required` without one); the caller's own
 * copies must agree. Optional in the schema only so its absence is a 403, not a 400.
 */
export const InvokeRequest = z
  .object({ caller: InvokeCaller, target: InvokeTarget, execution_context: ExecutionContextLayerConfig.optional() })
  .strict();
export type InvokeRequest = z.input<typeof InvokeRequest>;
export type InvokeRequestParsed = z.output<typeof InvokeRequest>;

/** One streamed chunk (Dify LLMResultChunk, trimmed). */
export const ChunkData = z.object({
  model: z.string(),
  delta: z.object({
    index: z.number().int().nonnegative(),
    message: z.object({
      content: z.string().default(''),
      reasoning_content: z.string().optional(),
      /** Reasoning blocks, each sent whole once it ended (its text was streamed as `reasoning_content` before). */
      reasoning_parts: z.array(ReasoningPart).optional(),
      /** The answer text's provider metadata so far (merged by the consumer). */
      content_provider_metadata: ProviderMetadata.optional(),
      tool_calls: z.array(ToolCall).optional(),
    }),
    usage: Usage.optional(),
    finish_reason: z.enum(['stop', 'length', 'tool_calls', 'content_filter', 'error']).nullable().optional(),
  }),
});
export type ChunkData = z.infer<typeof ChunkData>;

export const InvokeChunk = z.union([
  z.object({ code: z.literal(0), message: z.literal(''), data: ChunkData }),
  z.object({
    code: z.number().int().negative(),
    message: z.string(),
    // `code`: what a user can act on (core/domain/llm/errors.ts InvokeErrorReason), beside the Dify kind.
    // `usage`: what a call that failed after the provider worked on it is billed (estimated, as a cut call:
    // `provider_timeout`), so the caller's meter agrees with the ledger.
    data: z.object({ error_type: z.string(), message: z.string(), code: z.string().max(64).optional(), usage: Usage.optional() }),
  }),
]);
export type InvokeChunk = z.infer<typeof InvokeChunk>;

/** Provider failure kinds (Dify InvokeError subclasses), carried as `error_type` in error chunks. */
export const InvokeErrorType = z.enum([
  'InvokeRateLimitError',
  'InvokeAuthorizationError',
  'InvokeBadRequestError',
  'InvokeConnectionError',
  'InvokeServerUnavailableError',
  'InvokeError',
]);
