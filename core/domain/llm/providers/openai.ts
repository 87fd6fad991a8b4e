/**
 * OpenAI (api.openai.com or a proxy speaking its API) through @ai-sdk/openai: the Responses API by default
 * (reasoning summaries, cached-token usage), chat completions with `api: "chat"`. Tenant credentials
 * `{api_key, base_url?, organization?, api?}`; system-hosted with OPENAI_API_KEY (+ OPENAI_BASE_URL).
 *
 * `store: false` on every call: the conversation lives in our session snapshot, never at OpenAI (no retention, and it
 * works under zero data retention). A reasoning model then returns its reasoning items' encrypted content, which the
 * gateway passes on and the next request sends back whole (docs/models.md "Provider metadata that must round-trip").
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/openai');

export const OPENAI_PROVIDER = 'openai';

export const OpenAiCredentials = z
  .object({
    api_key: z.string().min(1),
    base_url: z.url().optional(),
    organization: z.string().min(1).optional(),
    /** `responses` (default) or `chat` (chat completions). */
    api: z.enum(['responses', 'chat']).optional(),
  })
  .strict();
export type OpenAiCredentials = z.infer<typeof OpenAiCredentials>;

export function createOpenAiProvider(opts: {
  catalogue: ModelCatalogue;
  system?: OpenAiCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  const client = async (c: OpenAiCredentials, fetchImpl?: typeof fetch) =>
    (await sdk()).createOpenAI({ apiKey: c.api_key, baseURL: c.base_url, organization: c.organization, fetch: fetchImpl });
  return createAiSdkProvider({
    name: OPENAI_PROVIDER,
    catalogue: opts.catalogue,
    credentials: OpenAiCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: 'gpt-4o-mini',
    model: async (c, model, f) => (c.api === 'chat' ? (await client(c, f)).chat(model) : (await client(c, f)).responses(model)),
    embedding: async (c, model, f) => (await client(c, f)).embedding(model),
    secrets: (c) => [c.api_key],
    providerOptions: (m, params) => ({
      openai: {
        store: false,
        ...(m.reasoning
          ? {
              reasoningSummary: 'auto',
              ...(typeof params.reasoning_effort === 'string' ? { reasoningEffort: params.reasoning_effort } : {}),
            }
          : {}),
      },
    }),
  });
}
