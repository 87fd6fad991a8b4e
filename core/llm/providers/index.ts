/** The providers a deployment offers. Adding a provider = one file in this folder + one line here. */
import type { Config } from '../../config.js';
import { ProviderRegistry } from '../provider.js';
import { createDemoProvider } from './demo.js';
import { createOpenAiCompatibleProvider } from './openai-compatible.js';

export type ProviderConfig = Pick<
  Config,
  'DEMO_MODEL_TOKEN_DELAY_MS' | 'OPENAI_COMPATIBLE_BASE_URL' | 'OPENAI_COMPATIBLE_API_KEY' | 'OPENAI_COMPATIBLE_MODEL'
>;

export function createDefaultProviders(config: ProviderConfig): ProviderRegistry {
  return new ProviderRegistry([
    createDemoProvider({ tokenDelayMs: config.DEMO_MODEL_TOKEN_DELAY_MS }),
    createOpenAiCompatibleProvider({
      baseUrl: config.OPENAI_COMPATIBLE_BASE_URL,
      apiKey: config.OPENAI_COMPATIBLE_API_KEY,
      model: config.OPENAI_COMPATIBLE_MODEL,
    }),
  ]);
}
