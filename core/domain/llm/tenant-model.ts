/**
 * A model as one tenant sees it: the catalogue (with the deployment's MODEL_CATALOGUE_OVERRIDES) and the models
 * the tenant's own credentials declare for an open provider's endpoint (openai_compatible, ollama:
 * `models: [{model, vision, context_window, prices, …}]`). The gateway meters a call by this entry
 * (core/domain/llm/invoke.ts resolves it the same way); /v1/parameters, the chat route's file check, the console model
 * list and the run request (context window, max output, prices for the agent backend) ask here, so a declared
 * model is what it declares everywhere, not only when it is called.
 */
import type { Db } from '../../platform/db.js';
import type { EncryptionKey } from './credentials.js';
import { readStoredCredentials } from './gateway-cache.js';
import type { ModelInfo, ProviderCredentials, ProviderRegistry } from './provider.js';

type CredentialDb = Pick<Db, 'modelProviderCredential'>;

/** The tenant's decrypted credentials for a provider; null when it has none or they cannot be read. */
export async function tenantCredentials(
  db: CredentialDb,
  encryptionKey: EncryptionKey | undefined,
  tenantId: string,
  provider: string,
): Promise<ProviderCredentials | null> {
  if (!encryptionKey) return null;
  // Through the process's gateway cache when the api in this process has one (a turn's preparation in an in-process worker).
  return readStoredCredentials(db, tenantId, provider)
    .then((stored) => stored.open(encryptionKey))
    .catch(() => null);
}

/** The model `provider/model` for this tenant (its declarations included); undefined when no provider serves it. */
export async function resolveTenantModel(
  db: CredentialDb,
  encryptionKey: EncryptionKey | undefined,
  registry: ProviderRegistry,
  tenantId: string,
  provider: string,
  model: string,
): Promise<ModelInfo | undefined> {
  const p = registry.get(provider);
  if (!p) return undefined;
  return p.resolveModel(model, await tenantCredentials(db, encryptionKey, tenantId, provider));
}
