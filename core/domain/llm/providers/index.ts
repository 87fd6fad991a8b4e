/**
 * The providers a deployment offers (docs/models.md). Adding a provider = one file in this folder (an AI SDK
 * package through ../ai-sdk/adapter.ts) + one line here + its models in ../catalogue/. A provider is
 * system-hosted (billed through the credit pool) when its variables below are set; any provider can also be
 * used with a tenant's own credentials (console /model-providers, unbilled).
 */
import type { Config } from '../../../platform/config.js';
import type { RetryOptions } from '../ai-sdk/adapter.js';
import { loadCatalogue, type ModelCatalogue, type StreamTimeouts } from '../catalogue/index.js';
import { createGuardedFetch } from '../../../platform/net/ssrf.js';
import { ProviderRegistry } from '../provider.js';
import { setActiveProviders } from '../model-check.js';
import { createAnthropicProvider } from './anthropic.js';
import { createAzureProvider } from './azure.js';
import { createBedrockProvider } from './bedrock.js';
import { createDemoProvider } from './demo.js';
import { createGoogleProvider } from './google.js';
import { createOllamaProvider } from './ollama.js';
import { createOpenAiProvider } from './openai.js';
import { createOpenAiCompatibleProvider } from './openai-compatible.js';

type SystemKeys =
  | 'OPENAI_API_KEY'
  | 'OPENAI_BASE_URL'
  | 'ANTHROPIC_API_KEY'
  | 'ANTHROPIC_BASE_URL'
  | 'GOOGLE_GENERATIVE_AI_API_KEY'
  | 'GOOGLE_BASE_URL'
  | 'AZURE_API_KEY'
  | 'AZURE_RESOURCE_NAME'
  | 'AZURE_BASE_URL'
  | 'AZURE_API_VERSION'
  | 'AWS_ACCESS_KEY_ID'
  | 'AWS_SECRET_ACCESS_KEY'
  | 'AWS_SESSION_TOKEN'
  | 'AWS_REGION'
  | 'BEDROCK_BASE_URL'
  | 'OLLAMA_BASE_URL'
  | 'MODEL_CATALOGUE_OVERRIDES'
  | 'ENCRYPTION_KEY'
  | 'MODEL_ALLOW_PRIVATE_NETWORK'
  | 'MODEL_FIRST_TOKEN_TIMEOUT_MS'
  | 'MODEL_IDLE_TIMEOUT_MS';

export type ProviderConfig = Pick<
  Config,
  'DEMO_MODEL_TOKEN_DELAY_MS' | 'OPENAI_COMPATIBLE_BASE_URL' | 'OPENAI_COMPATIBLE_API_KEY' | 'OPENAI_COMPATIBLE_MODEL'
> &
  Partial<Pick<Config, SystemKeys>>;

export interface ProviderWiring {
  /** Injected into every AI SDK provider (tests). */
  fetch?: typeof fetch;
  /** For calls on a tenant's own credentials; default the SSRF guard when MODEL_ALLOW_PRIVATE_NETWORK is false. */
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  catalogue?: ModelCatalogue;
}

/** The deployment's stream timeouts, where set (they win over the catalogue's per-model defaults). */
export function deploymentTimeouts(config: ProviderConfig): Partial<StreamTimeouts> {
  return {
    ...(config.MODEL_FIRST_TOKEN_TIMEOUT_MS !== undefined ? { firstTokenMs: config.MODEL_FIRST_TOKEN_TIMEOUT_MS } : {}),
    ...(config.MODEL_IDLE_TIMEOUT_MS !== undefined ? { idleMs: config.MODEL_IDLE_TIMEOUT_MS } : {}),
  };
}

const def = <T extends Record<string, unknown>>(o: T): T | undefined => o;

/** The system-hosted credentials a provider has from the environment, or undefined. */
export function systemCredentials(config: ProviderConfig) {
  return {
    openai: config.OPENAI_API_KEY ? def({ api_key: config.OPENAI_API_KEY, base_url: config.OPENAI_BASE_URL }) : undefined,
    anthropic: config.ANTHROPIC_API_KEY ? def({ api_key: config.ANTHROPIC_API_KEY, base_url: config.ANTHROPIC_BASE_URL }) : undefined,
    google: config.GOOGLE_GENERATIVE_AI_API_KEY
      ? def({ api_key: config.GOOGLE_GENERATIVE_AI_API_KEY, base_url: config.GOOGLE_BASE_URL })
      : undefined,
    azure:
      config.AZURE_API_KEY && (config.AZURE_RESOURCE_NAME || config.AZURE_BASE_URL)
        ? def({
            api_key: config.AZURE_API_KEY,
            resource_name: config.AZURE_RESOURCE_NAME,
            base_url: config.AZURE_BASE_URL,
            api_version: config.AZURE_API_VERSION,
          })
        : undefined,
    bedrock:
      config.AWS_ACCESS_KEY_ID && config.AWS_SECRET_ACCESS_KEY && config.AWS_REGION
        ? def({
            access_key_id: config.AWS_ACCESS_KEY_ID,
            secret_access_key: config.AWS_SECRET_ACCESS_KEY,
            session_token: config.AWS_SESSION_TOKEN,
            region: config.AWS_REGION,
            base_url: config.BEDROCK_BASE_URL,
          })
        : undefined,
    ollama: config.OLLAMA_BASE_URL ? def({ base_url: config.OLLAMA_BASE_URL }) : undefined,
  };
}

/** The usual model of each provider the demo agent starts on (a cheap one of the catalogue). */
const DEMO_MODELS: [keyof ReturnType<typeof systemCredentials>, string][] = [
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-3-5-haiku-20241022'],
  ['google', 'gemini-2.0-flash'],
  ['bedrock', 'anthropic.claude-3-5-haiku-20241022-v1:0'],
  ['ollama', 'llama3.2'],
];

/**
 * The model the demo agent is created on at first start (`npm start`, `admin create-app` without a config):
 * DEMO_AGENT_MODEL (`provider/model`) when set, else the first system-hosted provider of OPENAI_API_KEY,
 * ANTHROPIC_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY, AWS_* (Bedrock), OLLAMA_BASE_URL, OPENAI_COMPATIBLE_*
 * with its usual model, else undefined (the embedded demo model). Azure needs DEMO_AGENT_MODEL (its deployments
 * have names of their own).
 */
export function demoAgentModel(
  config: ProviderConfig & Partial<Pick<Config, 'DEMO_AGENT_MODEL'>>,
): { provider: string; model: string } | undefined {
  if (config.DEMO_AGENT_MODEL) {
    const i = config.DEMO_AGENT_MODEL.indexOf('/');
    if (i <= 0 || i === config.DEMO_AGENT_MODEL.length - 1)
      throw new Error('DEMO_AGENT_MODEL must be provider/model, e.g. anthropic/claude-3-5-haiku-20241022');
    return { provider: config.DEMO_AGENT_MODEL.slice(0, i), model: config.DEMO_AGENT_MODEL.slice(i + 1) };
  }
  const sys = systemCredentials(config);
  for (const [provider, model] of DEMO_MODELS) if (sys[provider]) return { provider, model };
  if (config.OPENAI_COMPATIBLE_BASE_URL) return { provider: 'openai_compatible', model: config.OPENAI_COMPATIBLE_MODEL ?? 'default' };
  return undefined;
}

export function createDefaultProviders(config: ProviderConfig, wiring: ProviderWiring = {}): ProviderRegistry {
  const catalogue = wiring.catalogue ?? loadCatalogue(config.MODEL_CATALOGUE_OVERRIDES);
  const sys = systemCredentials(config);
  // A tenant's base_url must not reach the deployment's own network (loopback, private ranges, metadata endpoints)
  // unless the deployment allows it; the deployment's own endpoints (the variables above) are trusted.
  const tenantFetch =
    wiring.tenantFetch ??
    (config.MODEL_ALLOW_PRIVATE_NETWORK === false ? (createGuardedFetch({ allowPrivate: false }) as typeof fetch) : undefined);
  const common = { catalogue, fetch: wiring.fetch, tenantFetch, retry: wiring.retry, timeouts: deploymentTimeouts(config) };
  const registry = new ProviderRegistry([
    createDemoProvider({ tokenDelayMs: config.DEMO_MODEL_TOKEN_DELAY_MS, catalogue }),
    createOpenAiCompatibleProvider({
      ...common,
      baseUrl: config.OPENAI_COMPATIBLE_BASE_URL,
      apiKey: config.OPENAI_COMPATIBLE_API_KEY,
      model: config.OPENAI_COMPATIBLE_MODEL,
    }),
    createOpenAiProvider({ ...common, system: sys.openai }),
    createAnthropicProvider({ ...common, system: sys.anthropic }),
    createGoogleProvider({ ...common, system: sys.google }),
    createAzureProvider({ ...common, system: sys.azure }),
    createBedrockProvider({ ...common, system: sys.bedrock }),
    createOllamaProvider({ ...common, system: sys.ollama }),
  ]);
  setActiveProviders(registry, config.ENCRYPTION_KEY);
  return registry;
}
