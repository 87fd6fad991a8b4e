/**
 * The model provider interface. A provider is one file under providers/ implementing `LlmProvider`;
 * register it in providers/index.ts (createDefaultProviders) and it is reachable through the inner
 * API as `target.provider = <name>`.
 */
import type { PromptMessage, ProviderMetadata, ReasoningPart, ToolCall, ToolDefinition } from '../../protocol/inner-llm.js';
import type { CatalogueModel } from './catalogue/index.js';
import type { ModelPrice } from './pricing.js';

export interface ModelInfo {
  model: string;
  label: string;
  supports_vision: boolean;
  supports_tools: boolean;
  context_window: number;
  /** Unit prices per 1M tokens (from the catalogue, catalogue/*.json). */
  pricing: ModelPrice;
  /** The catalogue entry behind this model (features, bounds), when it came from the catalogue. */
  entry?: CatalogueModel;
}

/** A catalogue entry as the ModelInfo the gateway checks requests against. */
export function modelInfoOf(entry: CatalogueModel): ModelInfo {
  return {
    model: entry.model,
    label: entry.label,
    supports_vision: entry.vision,
    supports_tools: entry.tool_calls,
    context_window: entry.context_window,
    pricing: entry.prices,
    entry,
  };
}

/** Token counts a model reports for one call. */
export interface ProviderUsage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Of prompt_tokens, read from the provider's prompt cache (priced at cached_input). */
  cached_prompt_tokens?: number;
  /** Of completion_tokens, spent on reasoning. */
  reasoning_tokens?: number;
}

/** Decrypted tenant credentials for one provider (shape defined by the provider). */
export type ProviderCredentials = Record<string, unknown>;

export interface ProviderInvokeRequest {
  model: string;
  prompt_messages: PromptMessage[];
  tools: ToolDefinition[];
  model_parameters: Record<string, unknown>;
  /** The tenant's own credentials, or null for a system-hosted call (the provider uses its config). */
  credentials: ProviderCredentials | null;
  /** Aborted when the caller disconnects; must reach the upstream request. */
  signal: AbortSignal;
  /**
   * What the provider package says it dropped or changed of this call (the AI SDK's warnings: a setting the model does
   * not support, a compatibility mode), once per call. The gateway logs and counts them (invoke.ts): otherwise a saved
   * setting that never reached the model leaves no trace.
   */
  onWarnings?(warnings: ProviderWarning[]): void;
}

/** One warning of a provider package about a call (the AI SDK's SharedV3Warning). */
export interface ProviderWarning {
  type: 'unsupported' | 'compatibility' | 'other';
  /** The setting or feature it is about (`temperature`, `stopSequences`, …); absent for `other`. */
  feature?: string;
  /** What the package says: its details, or the message of an `other` warning. */
  details?: string;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

/**
 * What a provider streams: deltas, then exactly one `finish`. Failures are thrown as `InvokeError`. A reasoning block
 * streams its text as `reasoning_content`, then comes whole in `reasoning_parts` with the metadata the provider needs
 * back (its signature); `content_provider_metadata` is the answer text's metadata so far.
 */
export type ProviderEvent =
  | {
      type: 'delta';
      content?: string;
      reasoning_content?: string;
      reasoning_parts?: ReasoningPart[];
      content_provider_metadata?: ProviderMetadata;
      tool_calls?: ToolCall[];
    }
  | {
      type: 'finish';
      finish_reason: FinishReason;
      /** Token counts reported by the model; null when it reported none (the api estimates). */
      usage: ProviderUsage | null;
    };

export interface LlmProvider {
  readonly name: string;
  /**
   * Models offered by this provider (what a model picker shows); with a tenant's `credentials`, also the models
   * they declare for an open provider's endpoint (core/domain/llm/tenant-model.ts).
   */
  models(credentials?: ProviderCredentials | null): ModelInfo[];
  /**
   * The model a request names, or undefined when this provider cannot serve it. `credentials` (the tenant's)
   * may declare custom models of an open provider (openai_compatible, ollama).
   */
  resolveModel(model: string, credentials?: ProviderCredentials | null): ModelInfo | undefined;
  /** Whether `model` is a catalogue or declared model (not only an open provider's defaults for any name). */
  isKnownModel?(model: string, credentials?: ProviderCredentials | null): boolean;
  /** Credentials shown to the console: secrets masked (`sk-…7f3a`), the rest as saved. */
  maskCredentials?(credentials: ProviderCredentials): Record<string, unknown>;
  /**
   * A real minimal call with these credentials (a one-word prompt, a few output tokens) on `model` or the
   * provider's cheapest catalogue model; throws the provider's InvokeError when it fails.
   */
  checkCredentials?(credentials: ProviderCredentials, opts: { model?: string; signal: AbortSignal }): Promise<void>;
  /** Whether the deployment itself can pay for calls (system-hosted); otherwise tenant credentials are required. */
  hasSystemCredentials(): boolean;
  /** Validates tenant credentials before they are saved; throws with a message naming the bad field. */
  parseCredentials(raw: unknown): ProviderCredentials;
  invoke(req: ProviderInvokeRequest): AsyncIterable<ProviderEvent>;
  /**
   * Optional: text embeddings (knowledge retrieval, docs/knowledge.md). Absent = the provider offers none.
   * Vectors are returned in input order, one per text, all of one length.
   */
  embed?(req: ProviderEmbedRequest): Promise<number[][]>;
}

export interface ProviderEmbedRequest {
  model: string;
  texts: string[];
  /** As in ProviderInvokeRequest: the tenant's credentials, or null for system-hosted. */
  credentials: ProviderCredentials | null;
  signal: AbortSignal;
}

export class ProviderRegistry {
  private readonly byName = new Map<string, LlmProvider>();

  constructor(providers: LlmProvider[] = []) {
    for (const p of providers) this.register(p);
  }

  register(provider: LlmProvider): this {
    if (this.byName.has(provider.name)) throw new Error(`provider ${provider.name} registered twice`);
    this.byName.set(provider.name, provider);
    return this;
  }

  get(name: string): LlmProvider | undefined {
    return this.byName.get(name);
  }

  list(): LlmProvider[] {
    return [...this.byName.values()];
  }
}

/** Text of a prompt message's content (image parts become `[image]`). */
export function contentText(content: PromptMessage['content']): string {
  if (typeof content === 'string') return content;
  return content.map((p) => (p.type === 'text' ? p.data : '[image]')).join('\n');
}

/** Resolves after `ms`, or rejects with the signal's reason when aborted first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
