/**
 * Amazon Bedrock (ConverseStream, AWS SigV4) through @ai-sdk/amazon-bedrock: text, reasoning content, tool
 * use with streamed input, images and documents where the model takes them, cache-read usage. The model name
 * is a Bedrock model id (`anthropic.claude-3-5-haiku-20241022-v1:0`); an inference profile (`us.…`) is declared
 * in MODEL_CATALOGUE_OVERRIDES with `like`. Tenant credentials `{access_key_id, secret_access_key,
 * session_token?, region, base_url?}`; system-hosted with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_REGION (+ AWS_SESSION_TOKEN, BEDROCK_BASE_URL).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/amazon-bedrock');

export const BEDROCK_PROVIDER = 'bedrock';

export const BedrockCredentials = z
  .object({
    access_key_id: z.string().min(1),
    secret_access_key: z.string().min(1),
    session_token: z.string().min(1).optional(),
    region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS region such as us-east-1'),
    base_url: z.url().optional(),
  })
  .strict();
export type BedrockCredentials = z.infer<typeof BedrockCredentials>;

export function createBedrockProvider(opts: {
  catalogue: ModelCatalogue;
  system?: BedrockCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  return createAiSdkProvider({
    name: BEDROCK_PROVIDER,
    catalogue: opts.catalogue,
    credentials: BedrockCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
    probeModel: 'anthropic.claude-3-haiku-20240307-v1:0',
    model: async (c, model, f) =>
      (await sdk()).createAmazonBedrock({
        region: c.region,
        accessKeyId: c.access_key_id,
        secretAccessKey: c.secret_access_key,
        sessionToken: c.session_token,
        baseURL: c.base_url,
        fetch: f,
      })(model),
    secrets: (c) => [c.secret_access_key, c.session_token, c.access_key_id],
    // Extended thinking of a reasoning model on Bedrock (Claude): ConverseStream's reasoningConfig.
    providerOptions: (m, params) =>
      m.reasoning && typeof params.thinking_budget === 'number'
        ? { bedrock: { reasoningConfig: { type: 'enabled', budgetTokens: params.thinking_budget } } }
        : undefined,
  });
}
