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
    providerOptions: (m) => (m.reasoning ? { ollama: { think: true } } : undefined),
  });
}
