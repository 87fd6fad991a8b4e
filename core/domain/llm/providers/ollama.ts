/**
 * Ollama's native API (`/api/chat`, newline-delimited JSON) through ollama-ai-provider-v2: text, `thinking`
 * as reasoning, tool calls, images for vision models. Any pulled model is served: the catalogue
 * (catalogue/ollama.json) knows common ones, the tenant's credentials or MODEL_CATALOGUE_OVERRIDES declare
 * others, the rest run as text-only with tools. Local calls cost nothing. Tenant credentials
 * `{base_url, api_key?, models?}` (base_url like http://127.0.0.1:11434/api); system-hosted with OLLAMA_BASE_URL.
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import { DeclaredModel, type ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('ollama-ai-provider-v2');

export const OLLAMA_PROVIDER = 'ollama';

export const OllamaCredentials = z
  .object({ base_url: z.url(), api_key: z.string().min(1).optional(), models: z.array(DeclaredModel).max(100).optional() })
  .strict();
export type OllamaCredentials = z.infer<typeof OllamaCredentials>;

export function createOllamaProvider(opts: {
  catalogue: ModelCatalogue;
  system?: OllamaCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  const client = async (c: OllamaCredentials, f?: typeof fetch) =>
    (await sdk()).createOllama({
      baseURL: c.base_url.replace(/\/+$/, ''),
      headers: c.api_key ? { authorization: `Bearer ${c.api_key}` } : undefined,
      fetch: f,
    });
  return createAiSdkProvider({
    name: OLLAMA_PROVIDER,
    catalogue: opts.catalogue,
    credentials: OllamaCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: 'llama3.2',
    model: async (c, model, f) => (await client(c, f))(model),
    embedding: async (c, model, f) => (await client(c, f)).embedding(model),
    secrets: (c) => [c.api_key],
    declared: (c) => c.models ?? [],
    providerOptions: (m, params) => {
      const options = ollamaOptions(params, m.temperature !== false);
      return m.reasoning || options ? { ollama: { ...(m.reasoning ? { think: true } : {}), ...(options ? { options } : {}) } } : undefined;
    },
  });
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * A model's settings as Ollama's /api/chat reads them: in `options` (temperature, top_p, num_predict, stop). The
 * provider package puts temperature, top_p and max_output_tokens beside the messages, where Ollama does not look, and
 * drops stop sequences, so without these a saved setting never reached the model.
 */
export function ollamaOptions(params: Record<string, unknown>, takesTemperature = true): Record<string, number | string[]> | undefined {
  const stop = Array.isArray(params.stop_sequences) ? params.stop_sequences.filter((s): s is string => typeof s === 'string') : [];
  const maxTokens = num(params.max_tokens);
  const options: Record<string, number | string[]> = {
    ...(takesTemperature && num(params.temperature) !== undefined ? { temperature: num(params.temperature) } : {}),
    ...(num(params.top_p) !== undefined ? { top_p: num(params.top_p) } : {}),
    ...(maxTokens !== undefined ? { num_predict: Math.trunc(maxTokens) } : {}),
    ...(stop.length ? { stop } : {}),
  };
  return Object.keys(options).length ? options : undefined;
}
