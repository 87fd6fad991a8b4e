/**
 * Module contract (docs/seeds/004): each module declares a config schema, a state schema and exactly one
 * capability (instructions, user prompt, history, model, output, execution context, resource scope)
 * or one toolset. The registry maps names to modules; a composition layer names an instance and the
 * module it uses, so aliases get independent config and state. Instances are created fresh per run.
 */
import type { z } from 'zod';
import type { ModelPrice } from '../../core/domain/llm/pricing.js';
import type { Logger } from '../../core/platform/logger.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';
import type { AgentStreamEvent, ExecutionContextLayerConfig, ModelSettings } from '../../core/protocol/run.js';

export type CapabilityKind = 'instructions' | 'user_prompt' | 'history' | 'model' | 'output' | 'execution_context' | 'resource' | 'toolset';

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON schema of the arguments. */
  parameters: Record<string, unknown>;
}

/** What a tool call produced: an observation for the model, or a deferral that ends the run. */
export type ToolOutcome =
  /** `files`: what the tool left for the user (the shell's `outputs/`), streamed on the tool result event as message files. */
  | { kind: 'result'; result: unknown; isError?: boolean; files?: NonNullable<AgentStreamEvent['files']> }
  | { kind: 'deferred'; args: Record<string, unknown>; metadata: Record<string, unknown> };

export interface ToolCallContext {
  runId: string;
  toolCallId: string;
  signal: AbortSignal;
  executionContext: ExecutionContextLayerConfig | null;
}

/** What augmentUserMessage gets: the run, its abort signal and the model's execution context. */
export type UserMessageContext = Omit<ToolCallContext, 'toolCallId'>;

/** Plugin tools (the `tools` layer) run through this; the deployment decides what exists. */
export interface PluginToolResolver {
  invoke(input: { provider: string; name: string; args: unknown; context: ToolCallContext }): Promise<unknown>;
}

export class ToolNotAvailableError extends Error {}

/** The tool answered with an error the model reads as is (an API tool's HTTP 404, an MCP tool's isError). */
export class ToolErrorResult extends Error {}

export const noPluginTools: PluginToolResolver = {
  async invoke({ provider, name }) {
    throw new ToolNotAvailableError(`tool not available: ${provider}/${name}`);
  },
};

export interface ModelBinding {
  provider: string;
  model: string;
  settings: ModelSettings;
  /** Name of the execution_context layer whose identity scopes model calls. */
  executionContextLayer: string;
  /** The model's context window (the api's catalogue for the tenant): each call's prompt is fitted into it. */
  contextWindow?: number;
  /** The model's max output tokens (reserved out of the window when settings.max_tokens is unset). */
  maxOutput?: number;
  /** The tenant's prices for the model (a cut call is priced by them); absent: the built-in catalogue's. */
  prices?: ModelPrice;
}

export type Capability =
  | { kind: 'instructions'; instructions(): string | null }
  | { kind: 'user_prompt'; userMessage(): PromptMessage }
  | { kind: 'history'; messages(): PromptMessage[]; save(messages: PromptMessage[]): void }
  | { kind: 'model'; binding(): ModelBinding }
  | { kind: 'output'; finalize(text: string): string }
  | { kind: 'execution_context'; context(): ExecutionContextLayerConfig }
  | { kind: 'resource' }
  | {
      kind: 'toolset';
      tools(): ToolSpec[];
      call(name: string, args: unknown, ctx: ToolCallContext): Promise<ToolOutcome>;
      /**
       * Optional: text to append to this run's new user message, before the first model request (knowledge: the
       * retrieved passages stay in the user role, docs/seeds/004). Not called when a resumed run re-sends the paused
       * turn's message: the history already holds it as it was sent.
       */
      augmentUserMessage?(message: PromptMessage, ctx: UserMessageContext): Promise<string | null>;
    };

/** Lease-scoped things a run borrows (operation leases, sessions, temporary credentials). */
export interface RunResources {
  acquire<T>(key: string, value: T, release: () => Promise<void> | void): T;
  get<T>(key: string): T | undefined;
}

export interface RunServices {
  runId: string;
  logger: Logger;
  toolResolver: PluginToolResolver;
  resources: RunResources;
  /** The config of the run's execution_context layer of that name (null: none); absent during validation. */
  executionContext?: (layer: string) => ExecutionContextLayerConfig | null;
  /** The run's abort signal (cancel, wall clock); absent during validation. */
  signal?: AbortSignal;
}

export interface LayerInstance {
  readonly name: string;
  readonly type: string;
  readonly capability: Capability;
  /** Current state; modules write it back explicitly (`this.state = next`). */
  state: unknown;
  /** Acquire resources; paired with exit, which runs in `finally` (also on failure/cancel). */
  enter?(): Promise<void>;
  exit?(): Promise<void>;
}

export interface CreateContext<C, S> {
  name: string;
  /** Deep-frozen: config is read-only during a run. */
  config: Readonly<C>;
  /** A validated copy; persist changes by assigning `instance.state`. */
  state: S;
  services: RunServices;
}

export interface LayerReference {
  /** The config field holding the reference (for error messages). */
  field: string;
  layer: string;
  /** Module names the target must be. */
  types: string[];
}

export interface ModuleDefinition<C = unknown, S = unknown> {
  name: string;
  capability: CapabilityKind;
  description: string;
  configSchema: z.ZodType<C>;
  stateSchema: z.ZodType<S>;
  /** The state of a run without a session snapshot (from the layer's config: the history's `initial_messages`). */
  initialState(config: C): S;
  /** When set the module is registered but cannot run here; compositions using it are rejected. */
  unavailable?: string;
  /** Cross-layer references in the config, validated before any I/O. */
  references?(config: C): LayerReference[];
  /** Extra validation that needs the whole composition, e.g. tool name clashes; throws on error. */
  create(ctx: CreateContext<C, S>): LayerInstance;
}

// Registry entries erase C/S; each module is type-checked where it is defined.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyModule = ModuleDefinition<any, any>;

export function defineModule<C, S>(def: ModuleDefinition<C, S>): AnyModule {
  return def as AnyModule;
}

/** A simple FIFO mutex: stateful tools that read and modify across awaits run one at a time. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
