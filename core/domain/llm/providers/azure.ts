/**
 * Azure OpenAI through @ai-sdk/azure, chat completions of the v1 API (`<base>/v1/chat/completions`, the
 * deployment's name as the model): the model name is the deployment's name. A deployment named like its model (`gpt-4o`) takes that model's catalogue entry; another name is
 * declared in MODEL_CATALOGUE_OVERRIDES (`{"provider":"azure","model":"prod-4o","like":"gpt-4o"}`).
 * Tenant credentials `{api_key, resource_name | base_url, api_version?}`; system-hosted with AZURE_API_KEY and
 * AZURE_RESOURCE_NAME (or AZURE_BASE_URL).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { ModelCatalogue } from '../catalogue/index.js';
import type { LlmProvider } from '../provider.js';

/** Imported on first use. */
const sdk = () => import('@ai-sdk/azure');

export const AZURE_PROVIDER = 'azure';

export const AzureCredentials = z
  .object({
    api_key: z.string().min(1),
    resource_name: z.string().min(1).optional(),
    /** `https://<resource>.openai.azure.com/openai` (wins over resource_name). */
    base_url: z.url().optional(),
    api_version: z.string().min(1).optional(),
  })
  .strict()
  .refine((c) => c.resource_name || c.base_url, { message: 'give resource_name or base_url', path: ['resource_name'] });
export type AzureCredentials = z.infer<typeof AzureCredentials>;

export function createAzureProvider(opts: {
  catalogue: ModelCatalogue;
  system?: AzureCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
}): LlmProvider {
  const client = async (c: AzureCredentials, f?: typeof fetch) =>
    (await sdk()).createAzure({
      apiKey: c.api_key,
      resourceName: c.base_url ? undefined : c.resource_name,
      baseURL: c.base_url,
      apiVersion: c.api_version,
      fetch: f,
    });
  return createAiSdkProvider({
    name: AZURE_PROVIDER,
    catalogue: opts.catalogue,
    credentials: AzureCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    probeModel: 'gpt-4o-mini',
    model: async (c, deployment, f) => (await client(c, f)).chat(deployment),
    embedding: async (c, deployment, f) => (await client(c, f)).embedding(deployment),
    secrets: (c) => [c.api_key],
    // A reasoning deployment's effort (chat completions' reasoning_effort; the package reads either key).
    providerOptions: (m, params) =>
      m.reasoning && typeof params.reasoning_effort === 'string'
        ? { openai: { reasoningEffort: params.reasoning_effort }, azure: { reasoningEffort: params.reasoning_effort } }
        : undefined,
  });
}
