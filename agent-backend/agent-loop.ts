/**
 * The agent loop, on the AI SDK (`ai@6`): one `streamText` call per model request, with our own loop
 * around it.
 *
 * Each step sends system instructions + history + this run's messages to the model through
 * `streamText` (the run's `LanguageModelV3`, `maxRetries: 0`, the run's abort signal, the request's
 * `call_index` as provider options), publishes its `fullStream` as events, and either ends (no tool
 * calls), dispatches the tool calls and loops, or ends with a deferred tool call (ask_human). Tools
 * are declared to the SDK without `execute`, so a step ends at its tool calls and this loop runs them:
 * serialized per stateful toolset, errors as observations, budgets checked first, ask_human deferred.
 * Messages are committed per complete step (assistant message + its tool results), so history stays
 * well-formed whatever interrupts the run.
 *
 * Why one file: the loop's step, its tool execution and its limits share one run state; split they would pass
 * that state around without making any part testable alone (test/agent-backend/agent-loop.test.ts covers it whole).
 */
import { jsonSchema, streamText, tool, type TextStreamPart, type Tool, type ToolSet } from 'ai';
import { BUILTIN_CATALOGUE } from '../core/domain/llm/catalogue/index.js';
import { priceFor } from '../core/domain/llm/pricing.js';
import type { Logger } from '../core/platform/logger.js';
import type { PromptMessage, ProviderMetadata, ToolCall } from '../core/protocol/inner-llm.js';
import type {
  CreateRunRequestParsed,
  DeferredToolCall,
  DeferredToolResult,
  ExecutionContextLayerConfig,
  ModelCallUsage,
} from '../core/protocol/run.js';
import type { RunLimits } from './composition.js';
import { ModelCallError, RunLimitExceededError } from './errors.js';
import type { RunEmitter } from './events.js';
import { difyUsageOf, rawToolArgsOf, type ModelCaller } from './model/inner-llm-model.js';
import { assistantMetadataOf, toolCallMetadataOf, type DifyAssistantMetadata } from './model/part-stream.js';
import { toModelMessages } from './model/prompt.js';
import { fitToContextWindow, toolDefinitionTokens, type FitResult } from './modules/history.js';
import type { LayerInstance, ToolOutcome, ToolSpec, UserMessageContext } from './modules/types.js';
import type { UsageMeter } from './usage.js';

/** What a model_response event says of a trimmed prompt. */
function historyTrimmed(fit: FitResult, contextWindow: number) {
  return {
    dropped_messages: fit.dropped_messages,
    dropped_turns: fit.dropped_turns,
    prompt_tokens: fit.prompt_tokens,
    budget_tokens: fit.budget_tokens,
    context_window: contextWindow,
  };
}

export type LoopResult = { kind: 'succeeded'; output: string } | { kind: 'deferred'; call: DeferredToolCall; output: string };

/** Conversation state shared with the run task, so an interrupted run can still save history. */
export interface LoopState {
  /** History + this run's committed messages (no system message). */
  messages: PromptMessage[];
  /** Text of the model response in progress (not yet committed). */
  partialText: string;
  /** Text of the latest model response (committed or not): the partial output on failure. */
  lastText: string;
  /** Next part index. Unique across the run (not per response), so consumers can key parts by it. */
  nextPartIndex: number;
}

export interface LoopContext {
  runId: string;
  request: CreateRunRequestParsed;
  instances: LayerInstance[];
  modelCaller: ModelCaller;
  emitter: RunEmitter;
  signal: AbortSignal;
  limits: RunLimits;
  usage: UsageMeter;
  state: LoopState;
  logger?: Logger;
}

/** What one model request streamed: its text, reasoning and tool calls, its usage and the metadata to send back. */
interface StepResult {
  text: string;
  reasoning: string;
  toolCalls: StepToolCall[];
  callUsage: Omit<ModelCallUsage, 'latency'> | null;
  assistantMetadata: DifyAssistantMetadata;
}

interface StepToolCall {
  index: number;
  id: string;
  name: string;
  rawArgs: string;
  args: unknown;
  /** What the provider needs back with the call (Gemini's thought signature). */
  providerMetadata?: ProviderMetadata;
}

type Capability<K extends LayerInstance['capability']['kind']> = Extract<LayerInstance['capability'], { kind: K }>;
type Instance<K extends LayerInstance['capability']['kind']> = LayerInstance & { capability: Capability<K> };
/** The run's layers of one capability kind. */
type LayersOf = <K extends LayerInstance['capability']['kind']>(kind: K) => Array<Instance<K>>;
type ToolOwners = Map<string, Instance<'toolset'>>;

/** What every step of a run sends the model: instructions, the bound model, the tools and which toolset owns each. */
interface RunSetup {
  system: string;
  binding: ReturnType<Capability<'model'>['binding']>;
  executionContext: ExecutionContextLayerConfig;
  model: ReturnType<ModelCaller>;
  toolOwners: ToolOwners;
  toolSpecs: ToolSpec[];
  /** As the AI SDK declares them, without `execute`: streamText stops at the tool calls and this loop executes them. */
  tools: Record<string, Tool>;
  /** The window each call's prompt must fit (the api's catalogue for the tenant; else the built-in catalogue's). */
  contextWindow: number | undefined;
  maxOutput: number | undefined;
  toolTokens: number;
}

/**
 * The loop in its phases: set the run up, open the conversation (history, a resumed call closed, the user's message),
 * then one model step after another — each ends the run (no tool calls, or ask_human deferred) or runs its tools.
 */
export async function runAgentLoop(ctx: LoopContext): Promise<LoopResult> {
  const { signal, usage, state } = ctx;
  const of: LayersOf = <K extends LayerInstance['capability']['kind']>(kind: K) =>
    ctx.instances.filter((i) => i.capability.kind === kind) as Array<Instance<K>>;
  const run = setUpRun(ctx, of);
  await openConversation(ctx, of, run.executionContext);
  if (!run.system && state.messages.length === 0) throw new Error('nothing to send to the model: no instructions, history or user prompt');

  for (;;) {
    throwIfAborted(signal);
    if (usage.modelRequests >= ctx.limits.maxModelRequests) {
      throw new RunLimitExceededError(`the run reached its limit of ${ctx.limits.maxModelRequests} model requests`);
    }
    const { step, assistant } = await modelStep(ctx, run);
    state.lastText = step.text;

    if (step.toolCalls.length === 0) {
      state.messages.push(assistant);
      state.partialText = '';
      return { kind: 'succeeded', output: step.text };
    }
    if (usage.toolCalls + step.toolCalls.length > ctx.limits.maxToolCalls) {
      throw new RunLimitExceededError(`the run reached its limit of ${ctx.limits.maxToolCalls} tool calls`);
    }
    usage.toolCalls += step.toolCalls.length;
    const { toolMessages, deferred } = await runToolCalls(ctx, run, step.toolCalls);
    state.messages.push(assistant, ...toolMessages);
    state.partialText = '';
    if (deferred) return { kind: 'deferred', call: deferred, output: step.text };
  }
}

/** The instructions, the bound model with its caller, and the tools of every toolset. */
function setUpRun(ctx: LoopContext, of: LayersOf): RunSetup {
  const system = of('instructions')
    .map((i) => i.capability.instructions())
    .filter((t): t is string => Boolean(t))
    .join('\n\n');
  const binding = of('model')[0].capability.binding();
  const ecLayer = of('execution_context').find((i) => i.name === binding.executionContextLayer);
  const executionContext: ExecutionContextLayerConfig | null = ecLayer ? ecLayer.capability.context() : null;
  if (!executionContext) throw new Error(`execution context layer '${binding.executionContextLayer}' is missing`);
  const model = ctx.modelCaller({
    runId: ctx.runId,
    provider: binding.provider,
    model: binding.model,
    caller: {
      tenant_id: executionContext.tenant_id,
      user_id: executionContext.user_id,
      user_from: executionContext.user_from,
      app_id: executionContext.app_id,
      agent_id: executionContext.agent_id,
      invoke_from: executionContext.invoke_from,
      agent_mode: ctx.request.purpose === 'agent_app' ? 'agent' : ctx.request.purpose,
    },
    executionContext,
  });

  const toolOwners: ToolOwners = new Map();
  const toolSpecs: ToolSpec[] = [];
  for (const ts of of('toolset')) {
    for (const spec of ts.capability.tools()) {
      toolOwners.set(spec.name, ts);
      toolSpecs.push(spec);
    }
  }
  const tools: Record<string, Tool> = {};
  for (const t of toolSpecs) {
    tools[t.name] = tool({ description: t.description, inputSchema: jsonSchema(t.parameters as Parameters<typeof jsonSchema>[0]) });
  }
  const builtin = BUILTIN_CATALOGUE.resolve(binding.provider, binding.model);
  return {
    system,
    binding,
    executionContext,
    model,
    toolOwners,
    toolSpecs,
    tools,
    contextWindow: binding.contextWindow ?? builtin?.context_window,
    maxOutput: binding.maxOutput ?? builtin?.max_output,
    toolTokens: toolDefinitionTokens(toolSpecs),
  };
}

/** Earlier turns, then any deferred call left open closed (resumed with its result, or "unavailable"), then the query. */
async function openConversation(ctx: LoopContext, of: LayersOf, executionContext: ExecutionContextLayerConfig): Promise<void> {
  const { emitter, state, signal } = ctx;
  state.messages = [...(of('history')[0]?.capability.messages() ?? [])];
  const results = ctx.request.deferred_tool_results?.calls ?? {};
  const closed = closeDanglingToolCalls(state.messages, results);
  state.messages = closed.messages;
  for (const c of closed.closed) {
    await emitter.event('pydantic_ai_event', {
      event_kind: 'function_tool_result',
      tool_call_id: c.call.id,
      tool_name: c.call.function.name,
      result: c.result,
      is_error: false,
    });
  }
  // A resume re-sends the paused turn's query (the composition must match the snapshot): when a
  // deferred call was just closed and the user prompt equals the last user message, it is not new
  // input. A new turn after an abandoned form closes the call as unavailable and adds its query.
  const user = of('user_prompt')[0]?.capability.userMessage();
  const lastUser = [...state.messages].reverse().find((m) => m.role === 'user');
  const resending = closed.closed.length > 0 && user !== undefined && lastUser !== undefined && isSameUserMessage(user, lastUser);
  if (user && !resending) {
    state.messages.push(await augmentUserMessage(user, of('toolset'), { runId: ctx.runId, signal, executionContext }));
  }
}

/** One model request: the prompt fitted to the window, streamed as events, and the assistant message it makes. */
async function modelStep(ctx: LoopContext, run: RunSetup): Promise<{ step: StepResult; assistant: PromptMessage }> {
  const { emitter, signal, usage, state } = ctx;
  const { binding, contextWindow } = run;
  const { settings } = binding;
  const callIndex = usage.beginModelRequest();
  state.partialText = '';
  // One streamText call = one model request with its own call_index. maxRetries: 0 because the
  // model adapter (InnerLlmModel) retries transport failures itself, before and during the stream,
  // replaying the same call_index and skipping what was already streamed (SDK retries would only
  // cover the start, and would also retry the model's own errors).
  // The instructions are ours (layers), not user input: kept as the leading system message so a
  // run without any user message still sends them.
  // Fitted into the model's context window: the oldest turns left out when the conversation outgrew it (history.ts).
  const fit = contextWindow
    ? fitToContextWindow(run.system || null, state.messages, {
        contextWindow,
        maxTokens: settings.max_tokens,
        maxOutput: run.maxOutput,
        extraTokens: run.toolTokens,
      })
    : null;
  const sent = fit ? fit.messages : state.messages;
  if (fit?.dropped_messages) {
    ctx.logger?.info(
      {
        runId: ctx.runId,
        call_index: callIndex,
        dropped_messages: fit.dropped_messages,
        dropped_turns: fit.dropped_turns,
        prompt_tokens: fit.prompt_tokens,
        budget_tokens: fit.budget_tokens,
        context_window: contextWindow,
      },
      'agent loop: history trimmed to the model context window',
    );
  }
  const prompt: PromptMessage[] = [...(run.system ? [{ role: 'system' as const, content: run.system }] : []), ...sent];
  const result = streamText({
    model: run.model,
    messages: toModelMessages(prompt),
    allowSystemInMessages: true,
    ...(run.toolSpecs.length > 0 ? { tools: run.tools, toolChoice: 'auto' as const } : {}),
    ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
    ...(settings.top_p !== undefined ? { topP: settings.top_p } : {}),
    ...(settings.presence_penalty !== undefined ? { presencePenalty: settings.presence_penalty } : {}),
    ...(settings.frequency_penalty !== undefined ? { frequencyPenalty: settings.frequency_penalty } : {}),
    ...(settings.max_tokens !== undefined ? { maxOutputTokens: settings.max_tokens } : {}),
    ...(settings.stop_sequences?.length ? { stopSequences: settings.stop_sequences } : {}),
    maxRetries: 0,
    abortSignal: signal,
    // Reasoning options travel beside the call index: the AI SDK has no common option for them (inner-llm-model.ts).
    providerOptions: {
      dify: {
        call_index: callIndex,
        ...(settings.thinking_budget !== undefined ? { thinking_budget: settings.thinking_budget } : {}),
        ...(settings.reasoning_effort !== undefined ? { reasoning_effort: settings.reasoning_effort } : {}),
      },
    },
    // URLs go to the model as they are (the api fetches what it needs); nothing is downloaded here.
    experimental_download: async (files) => files.map(() => null),
    // Errors arrive as `error` parts of fullStream and end the run; no console logging.
    onError: () => undefined,
  });

  // A stop cuts the call before it reports usage: what it consumed and generated still counts (estimated).
  const requestStartedAt = Date.now();
  const step = await consumeStep(result.fullStream, ctx, (generated) =>
    usage.addCutModelCall(prompt, generated, binding.prices ?? priceFor(binding.provider, binding.model)),
  );
  // The request's own usage (the agent log's iteration: tokens, price, latency; issue 18), before its tool calls.
  if (step.callUsage) {
    await emitter.event('pydantic_ai_event', {
      event_kind: 'model_response',
      call_index: callIndex,
      usage: { ...step.callUsage, latency: Math.round(Date.now() - requestStartedAt) / 1000 },
      ...(fit?.dropped_messages ? { history_trimmed: historyTrimmed(fit, contextWindow!) } : {}),
    });
  }
  return { step, assistant: assistantMessageOf(step) };
}

/**
 * The step as the history's assistant message, with the provider metadata the next request must send back (signed
 * thinking, thought signatures, encrypted reasoning): it lives in history, so in the session snapshot
 * (docs/models.md "Provider metadata that must round-trip").
 */
function assistantMessageOf(step: StepResult): PromptMessage {
  const { reasoning_parts, content_provider_metadata } = step.assistantMetadata;
  return {
    role: 'assistant',
    content: step.text,
    ...(step.reasoning ? { reasoning_content: step.reasoning } : {}),
    ...(reasoning_parts?.some((r) => r.provider_metadata) ? { reasoning_parts } : {}),
    ...(content_provider_metadata ? { content_provider_metadata } : {}),
    ...(step.toolCalls.length
      ? {
          tool_calls: step.toolCalls.map((c): ToolCall => ({
            id: c.id,
            type: 'function',
            function: { name: c.name, arguments: c.rawArgs },
            ...(c.providerMetadata ? { provider_metadata: c.providerMetadata } : {}),
          })),
        }
      : {}),
  };
}

/** A step's tool calls in order, each published as call and result; the first ask_human is deferred, a second refused. */
async function runToolCalls(
  ctx: LoopContext,
  run: RunSetup,
  calls: StepToolCall[],
): Promise<{ toolMessages: PromptMessage[]; deferred: DeferredToolCall | null }> {
  const { emitter, signal } = ctx;
  const toolMessages: PromptMessage[] = [];
  let deferred: DeferredToolCall | null = null;
  for (const call of calls) {
    throwIfAborted(signal);
    await emitter.event('pydantic_ai_event', {
      event_kind: 'function_tool_call',
      index: call.index,
      tool_call_id: call.id,
      tool_name: call.name,
      args: call.args,
    });
    const toolStartedAt = Date.now();
    let outcome = await dispatchTool(call, run.toolOwners, ctx, run.executionContext);
    if (outcome.kind === 'deferred') {
      if (!deferred) {
        deferred = { tool_call_id: call.id, tool_name: call.name, args: outcome.args, metadata: outcome.metadata };
        continue;
      }
      outcome = { kind: 'result', result: 'Only one ask_human call per turn: ask one question at a time.', isError: true };
    }
    toolMessages.push({
      role: 'tool',
      tool_call_id: call.id,
      name: call.name,
      content: typeof outcome.result === 'string' ? outcome.result : JSON.stringify(outcome.result ?? null),
    });
    await emitter.event('pydantic_ai_event', {
      event_kind: 'function_tool_result',
      index: call.index,
      tool_call_id: call.id,
      tool_name: call.name,
      result: outcome.result,
      is_error: Boolean(outcome.isError),
      duration_ms: Date.now() - toolStartedAt,
      ...(outcome.files?.length ? { files: outcome.files } : {}),
    });
  }
  return { toolMessages, deferred };
}

async function dispatchTool(
  call: StepToolCall,
  owners: ToolOwners,
  ctx: LoopContext,
  executionContext: ExecutionContextLayerConfig,
): Promise<ToolOutcome> {
  const owner = owners.get(call.name);
  if (!owner)
    return {
      kind: 'result',
      result: `Unknown tool '${call.name}'. Available tools: ${[...owners.keys()].join(', ') || 'none'}.`,
      isError: true,
    };
  if (typeof call.args === 'string')
    return { kind: 'result', result: 'The tool arguments are not valid JSON. Call the tool again with a JSON object.', isError: true };
  try {
    return await owner.capability.call(call.name, call.args, {
      runId: ctx.runId,
      toolCallId: call.id,
      signal: ctx.signal,
      executionContext,
    });
  } catch (err) {
    throwIfAborted(ctx.signal);
    return { kind: 'result', result: `Tool ${call.name} failed: ${(err as Error)?.message ?? String(err)}`, isError: true };
  }
}

async function consumeStep(
  stream: ReadableStream<TextStreamPart<ToolSet>>,
  ctx: LoopContext,
  onCut: (generated: string) => void,
): Promise<StepResult> {
  const { emitter, usage, state, signal } = ctx;
  const reader = stream.getReader();
  let textIndex = -1;
  let reasoningIndex = -1;
  let text = '';
  let reasoning = '';
  const toolCalls: StepToolCall[] = [];
  let reported = false;
  let callUsage: Omit<ModelCallUsage, 'latency'> | null = null;
  let assistantMetadata: DifyAssistantMetadata = {};
  // A model that ignores the abort signal must not keep the run alive.
  const aborted = new Promise<never>((_, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) break;
      switch (value.type) {
        case 'reasoning-start':
          reasoningIndex = state.nextPartIndex++;
          await emitter.event('pydantic_ai_event', {
            event_kind: 'part_start',
            index: reasoningIndex,
            part: { part_kind: 'thinking', content: '' },
          });
          break;
        case 'reasoning-delta':
          usage.markFirstToken();
          reasoning += value.text;
          emitter.delta('thinking', reasoningIndex, value.text);
          break;
        case 'reasoning-end':
          await emitter.event('pydantic_ai_event', {
            event_kind: 'part_end',
            index: reasoningIndex,
            part: { part_kind: 'thinking', content: reasoning },
          });
          break;
        case 'text-start':
          textIndex = state.nextPartIndex++;
          await emitter.event('pydantic_ai_event', {
            event_kind: 'part_start',
            index: textIndex,
            part: { part_kind: 'text', content: '' },
          });
          break;
        case 'text-delta':
          usage.markFirstToken();
          text += value.text;
          state.partialText = text;
          emitter.delta('text', textIndex, value.text);
          break;
        case 'text-end':
          await emitter.event('pydantic_ai_event', {
            event_kind: 'part_end',
            index: textIndex,
            part: { part_kind: 'text', content: text },
          });
          break;
        case 'tool-input-start':
        case 'tool-input-delta':
          // Calls are published complete (part_start at `tool-call`), as before.
          break;
        case 'tool-call': {
          // Unknown tools and invalid JSON come as `invalid` calls (input = the raw text when it is not
          // JSON); dispatchTool turns them into observations. The SDK's `tool-error` part is ignored.
          usage.markFirstToken();
          const input: unknown = value.input;
          const call: StepToolCall = {
            index: state.nextPartIndex++,
            id: value.toolCallId || `call_${ctx.runId.slice(0, 8)}_${usage.modelRequests}_${toolCalls.length}`,
            name: value.toolName,
            rawArgs: rawToolArgsOf(value.providerMetadata) ?? (typeof input === 'string' ? input : JSON.stringify(input ?? {})),
            args: input,
          };
          const meta = toolCallMetadataOf(value.providerMetadata);
          if (meta) call.providerMetadata = meta;
          toolCalls.push(call);
          await emitter.event('pydantic_ai_event', {
            event_kind: 'part_start',
            index: call.index,
            part: { part_kind: 'tool-call', tool_name: call.name, tool_call_id: call.id, args: call.args },
          });
          break;
        }
        case 'finish-step':
          // Per model request: the inner endpoint's usage (with prices) rides in providerMetadata.
          callUsage = usage.addModelUsage(difyUsageOf(value.providerMetadata), value.usage);
          assistantMetadata = assistantMetadataOf(value.providerMetadata);
          reported = true;
          break;
        case 'error':
          throwIfAborted(signal);
          throw value.error instanceof Error ? value.error : new ModelCallError('InvokeError', String(value.error));
        case 'abort':
          throwIfAborted(signal);
          throw new Error('the model stream was aborted');
        default:
          break;
      }
    }
  } catch (err) {
    if (signal.aborted && !reported) onCut(reasoning + text + toolCalls.map((c) => c.name + c.rawArgs).join(''));
    // A call the gateway billed although it failed (the provider stalled mid-answer): counted as it was billed.
    else if (!reported && err instanceof ModelCallError && err.usage) usage.addModelUsage(err.usage);
    throwIfAborted(signal);
    throw err;
  } finally {
    reader.cancel().catch(() => undefined);
  }
  throwIfAborted(signal);
  return { text, reasoning, toolCalls, callUsage, assistantMetadata };
}

/**
 * The user message with what toolsets append to it (knowledge passages), as extra text parts after its own content,
 * so the message stays recognisable on a resume (isSameUserMessage).
 */
async function augmentUserMessage(
  user: PromptMessage,
  toolsets: Array<LayerInstance & { capability: { kind: 'toolset' } }>,
  ctx: UserMessageContext,
): Promise<PromptMessage> {
  if (user.role !== 'user') return user;
  const extra: string[] = [];
  for (const ts of toolsets) {
    const text = await ts.capability.augmentUserMessage?.(user, ctx);
    if (text) extra.push(text);
  }
  if (extra.length === 0) return user;
  return { role: 'user', content: [...asParts(user.content), ...extra.map((data) => ({ type: 'text' as const, data }))] };
}

type UserContent = Extract<PromptMessage, { role: 'user' }>['content'];
const asParts = (content: UserContent) => (typeof content === 'string' ? [{ type: 'text' as const, data: content }] : content);

/** Whether `stored` (from history) is `user` as sent: itself, or itself with augmentation parts appended. */
export function isSameUserMessage(user: PromptMessage, stored: PromptMessage): boolean {
  if (JSON.stringify(user) === JSON.stringify(stored)) return true;
  if (user.role !== 'user' || stored.role !== 'user' || typeof stored.content === 'string') return false;
  const own = asParts(user.content);
  return stored.content.length > own.length && JSON.stringify(stored.content.slice(0, own.length)) === JSON.stringify(own);
}

/**
 * Gives every tool call in history without a result one: the deferred result from the request, or
 * `{status: "unavailable"}` (the form was cancelled or the conversation moved on).
 */
export function closeDanglingToolCalls(
  messages: PromptMessage[],
  results: Record<string, DeferredToolResult>,
): { messages: PromptMessage[]; closed: Array<{ call: ToolCall; result: DeferredToolResult }> } {
  const answered = new Set(messages.filter((m) => m.role === 'tool').map((m) => (m as { tool_call_id: string }).tool_call_id));
  const out: PromptMessage[] = [];
  const closed: Array<{ call: ToolCall; result: DeferredToolResult }> = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    out.push(m);
    if (m.role !== 'assistant' || !m.tool_calls?.length) continue;
    while (i + 1 < messages.length && messages[i + 1].role === 'tool') out.push(messages[++i]);
    for (const call of m.tool_calls) {
      if (answered.has(call.id)) continue;
      const result: DeferredToolResult = results[call.id] ?? { status: 'unavailable' };
      out.push({ role: 'tool', tool_call_id: call.id, name: call.function.name, content: JSON.stringify(result) });
      closed.push({ call, result });
    }
  }
  return { messages: out, closed };
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason;
}
