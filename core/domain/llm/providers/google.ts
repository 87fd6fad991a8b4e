/**
 * Google Gemini (Generative Language API, `streamGenerateContent?alt=sse`) through @ai-sdk/google: text,
 * thought summaries as reasoning, function calls, images and PDFs, cached-content usage. Tenant credentials
 * `{api_key, base_url?}`; system-hosted with GOOGLE_GENERATIVE_AI_API_KEY (+ GOOGLE_BASE_URL).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/google');

export const GOOGLE_PROVIDER = 'google';

export const GoogleCredentials = z.object({ api_key: z.string().min(1), base_url: z.url().optional() }).strict();
export type GoogleCredentials = z.infer<typeof GoogleCredentials>;

export function createGoogleProvider(opts: {
  catalogue: ModelCatalogue;
  system?: GoogleCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  const client = async (c: GoogleCredentials, f?: typeof fetch) =>
    (await sdk()).createGoogleGenerativeAI({ apiKey: c.api_key, baseURL: c.base_url, fetch: f });
  return createAiSdkProvider({
    name: GOOGLE_PROVIDER,
    catalogue: opts.catalogue,
    credentials: GoogleCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: 'gemini-2.0-flash-lite',
    model: async (c, model, f) => (await client(c, f))(model),
    embedding: async (c, model, f) => (await client(c, f)).embedding(model),
    secrets: (c) => [c.api_key],
    providerOptions: (m, params) =>
      m.reasoning
        ? {
            google: {
              thinkingConfig: {
                includeThoughts: true,
                ...(typeof params.thinking_budget === 'number' ? { thinkingBudget: params.thinking_budget } : {}),
              },
            },
          }
        : undefined,
  });
}
