/**
 * Any OpenAI-style `/chat/completions` endpoint (vLLM, LM Studio, llama.cpp, OpenRouter, Groq, DeepSeek,
 * Ollama's /v1, ...) through @ai-sdk/openai-compatible: streamed text, `reasoning_content` / `reasoning`
 * deltas, tool calls with streamed arguments, usage with cached and reasoning tokens (`include_usage`).
 * It serves any model name; what a model can do is declared — by the deployment (MODEL_CATALOGUE_OVERRIDES,
 * provider `openai_compatible`) or in the tenant's credentials (`models: [{model, vision, context_window, …}]`)
 * — else the defaults of catalogue/openai-compatible.json (text only, tools on). Credentials come from the
 * tenant (`{base_url, api_key?, models?}`, unbilled) or from OPENAI_COMPATIBLE_* (system-hosted, billed).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import { BUILTIN_CATALOGUE, DeclaredModel, type ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/openai-compatible');

export const OPENAI_COMPATIBLE_PROVIDER = 'openai_compatible';

export const OpenAiCompatibleCredentials = z
  .object({
    base_url: z.url(),
    api_key: z.string().optional(),
    models: z.array(DeclaredModel).max(100).optional(),
  })
  .strict();
export type OpenAiCompatibleCredentials = z.infer<typeof OpenAiCompatibleCredentials>;

export interface OpenAiCompatibleOptions {
  /** System-hosted endpoint (OPENAI_COMPATIBLE_BASE_URL), e.g. http://127.0.0.1:8000/v1. */
  baseUrl?: string;
  apiKey?: string;
  /** The model offered in model lists (OPENAI_COMPATIBLE_MODEL); other names are passed through. */
  model?: string;
  catalogue?: ModelCatalogue;
  /** Injected for tests. */
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}

/** Model names are passed to the endpoint as-is; this only keeps obvious garbage out. */
const MODEL_NAME = /^[\w.:/@+-]{1,200}$/;

export function createOpenAiCompatibleProvider(opts: OpenAiCompatibleOptions = {}): LlmProvider {
  const catalogue = opts.catalogue ?? BUILTIN_CATALOGUE;
  const client = async (c: OpenAiCompatibleCredentials, f?: typeof fetch) =>
    (await sdk()).createOpenAICompatible({
      name: OPENAI_COMPATIBLE_PROVIDER,
      baseURL: c.base_url.replace(/\/+$/, ''),
      apiKey: c.api_key || undefined,
      includeUsage: true,
      fetch: f,
    });
  const inner = createAiSdkProvider({
    name: OPENAI_COMPATIBLE_PROVIDER,
    catalogue,
    credentials: OpenAiCompatibleCredentials,
    system: opts.baseUrl ? { base_url: opts.baseUrl, ...(opts.apiKey ? { api_key: opts.apiKey } : {}) } : undefined,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: opts.model,
    model: async (c, model, f) => (await client(c, f)).chatModel(model),
    embedding: async (c, model, f) => (await client(c, f)).embeddingModel(model),
    secrets: (c) => [c.api_key],
    declared: (c) => c.models ?? [],
  });
  return {
    ...inner,
    models: (credentials) => {
      const listed = inner.models(credentials);
      if (opts.model && !listed.some((m) => m.model === opts.model)) {
        const own = inner.resolveModel(opts.model);
        if (own) listed.push(own);
      }
      return listed;
    },
    resolveModel: (model, credentials) => (MODEL_NAME.test(model) ? inner.resolveModel(model, credentials) : undefined),
    // The deployment's own model counts as declared (it configured it).
    isKnownModel: (model, credentials) => model === opts.model || (inner.isKnownModel?.(model, credentials) ?? false),
  };
}
