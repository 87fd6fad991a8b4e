/**
 * Google Gemini (Generative Language API, `streamGenerateContent?alt=sse`) through @ai-sdk/google: text,
 * thought summaries as reasoning, function calls, images and PDFs, cached-content usage. Tenant credentials
 * `{api_key, base_url?}`; system-hosted with GOOGLE_GENERATIVE_AI_API_KEY (+ GOOGLE_BASE_URL).
 */
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

export const GOOGLE_PROVIDER = 'google';

export const GoogleCredentials = z.object({ api_key: z.string().min(1), base_url: z.url().optional() }).strict();
export type GoogleCredentials = z.infer<typeof GoogleCredentials>;

export function createGoogleProvider(opts: {
  catalogue: ModelCatalogue;
  system?: GoogleCredentials;
  fetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
}): LlmProvider {
  const client = (c: GoogleCredentials, f?: typeof fetch) => createGoogleGenerativeAI({ apiKey: c.api_key, baseURL: c.base_url, fetch: f });
  return createAiSdkProvider({
    name: GOOGLE_PROVIDER,
    catalogue: opts.catalogue,
    credentials: GoogleCredentials,
    system: opts.system,
    fetch: opts.fetch,
    retry: opts.retry,
    probeModel: 'gemini-2.0-flash-lite',
    model: (c, model, f) => client(c, f)(model),
    embedding: (c, model, f) => client(c, f).embedding(model),
    secrets: (c) => [c.api_key],
    providerOptions: (m) => (m.reasoning ? { google: { thinkingConfig: { includeThoughts: true } } } : undefined),
  });
}
