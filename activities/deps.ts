import type { AgentBackendClient } from '../core/protocol/backend-client.js';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import type { ModelInfo } from '../core/domain/llm/provider.js';
import type { Logger } from '../core/platform/logger.js';

/** Everything activities touch, injected so tests can pass real or fake parts without module mocks. */
export interface ActivityDeps {
  db: Db;
  backend: AgentBackendClient;
  config: Config;
  logger: Logger;
  clock?: () => Date;
  /** Whether a model takes images natively (docs/seeds/000 resolve_model_supports_vision); default: `resolveModel`'s word, else no. */
  modelSupportsVision?: (provider: string, model: string) => boolean;
  /**
   * The model as the tenant sees it (catalogue, overrides, its credentials' declarations: core/domain/llm/tenant-model.ts):
   * vision, context window, max output and prices for the run request. Default: unknown (the backend's defaults).
   */
  resolveModel?: (tenantId: string, provider: string, model: string) => Promise<ModelInfo | undefined>;
}
