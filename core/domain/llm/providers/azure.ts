/**
 * Azure OpenAI through @ai-sdk/azure, chat completions of the v1 API (`<base>/v1/chat/completions`, the
 * deployment's name as the model): the model name is the deployment's name. A deployment named like its model (`gpt-4o`) takes that model's catalogue entry; another name is
 * declared in MODEL_CATALOGUE_OVERRIDES (`{"provider":"azure","model":"prod-4o","like":"gpt-4o"}`).
 * Tenant credentials `{api_key, resource_name | base_url, api_version?}`; system-hosted with AZURE_API_KEY and
 * AZURE_RESOURCE_NAME (or AZURE_BASE_URL: the resource's `/openai` URL, or a proxy's equivalent, which gets the same
 * `/v1` paths and `api-version` the resource would).
 */
import { z } from 'zod';
import { createAiSdkProvider, type RetryOptions } from '../ai-sdk/adapter.js';
import type { StreamTimeouts } from '../catalogue/index.js';
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

/** Azure's own hosts, where @ai-sdk/azure adds `/v1` and `api-version` itself (its getAzureOpenAIBaseURLInfo). */
export function isAzureHost(baseUrl: string): boolean {
  const host = new URL(baseUrl).hostname;
  return ['.openai.azure.com', '.services.ai.azure.com', '.cognitiveservices.azure.com'].some((d) => host.endsWith(d));
}

/**
 * A proxy in front of Azure (an API gateway at `https://gw.example.com/openai`) gets the requests the resource would:
 * `<base>/v1/chat/completions?api-version=v1`. The package sends a non-Azure base URL's requests bare (no `/v1`, no
 * `api-version`), which such a proxy forwards to a path Azure does not serve.
 */
export function proxyBaseUrl(baseUrl: string): string {
  const trimmed = baseUrl.replace(/\/+$/, '');
  return /\/v1$/i.test(trimmed) ? trimmed : `${trimmed}/v1`;
}

function withApiVersion(version: string, f: typeof fetch): typeof fetch {
  return (input, init) => {
    if (input instanceof Request) return f(input, init); // the package passes URLs as strings
    const url = new URL(String(input));
    if (!url.searchParams.has('api-version')) url.searchParams.set('api-version', version);
    return f(url, init);
  };
}

export function createAzureProvider(opts: {
  catalogue: ModelCatalogue;
  system?: AzureCredentials;
  fetch?: typeof fetch;
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  timeouts?: Partial<StreamTimeouts>;
}): LlmProvider {
  const client = async (c: AzureCredentials, f?: typeof fetch) => {
    const proxied = c.base_url && !isAzureHost(c.base_url);
    return (await sdk()).createAzure({
      apiKey: c.api_key,
      resourceName: c.base_url ? undefined : c.resource_name,
      baseURL: proxied ? proxyBaseUrl(c.base_url!) : c.base_url,
      apiVersion: c.api_version,
      fetch: proxied ? withApiVersion(c.api_version ?? 'v1', f ?? fetch) : f,
    });
  };
  return createAiSdkProvider({
    name: AZURE_PROVIDER,
    catalogue: opts.catalogue,
    credentials: AzureCredentials,
    system: opts.system,
    fetch: opts.fetch,
    tenantFetch: opts.tenantFetch,
    retry: opts.retry,
    timeouts: opts.timeouts,
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
