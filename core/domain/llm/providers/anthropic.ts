/**
 * Anthropic Messages API through @ai-sdk/anthropic: text, `thinking` blocks (as reasoning, when the model
 * thinks: extended thinking is on when the model settings carry `thinking_budget`, at least 1024), `tool_use`
 * with streamed input, images, prompt-cache usage. Tenant credentials `{api_key, base_url?}`; system-hosted
 * with ANTHROPIC_API_KEY (+ ANTHROPIC_BASE_URL).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/anthropic');

export const ANTHROPIC_PROVIDER = 'anthropic';

export const AnthropicCredentials = z.object({ api_key: z.string().min(1), base_url: z.url().optional() }).strict();
export type AnthropicCredentials = z.infer<typeof AnthropicCredentials>;

export function createAnthropicProvider(opts: {
  catalogue: ModelCatalogue;
  system?: AnthropicCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  return createAiSdkProvider({
    name: ANTHROPIC_PROVIDER,
    catalogue: opts.catalogue,
    credentials: AnthropicCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: 'claude-3-5-haiku-20241022',
    model: async (c, model, f) => (await sdk()).createAnthropic({ apiKey: c.api_key, baseURL: c.base_url, fetch: f })(model),
    secrets: (c) => [c.api_key],
    providerOptions: (m, params) => {
      const budget = typeof params.thinking_budget === 'number' ? params.thinking_budget : undefined;
      if (!m.reasoning || !budget) return undefined;
      return { anthropic: { thinking: { type: 'enabled', budgetTokens: budget } } };
    },
  });
}
