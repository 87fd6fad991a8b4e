import type { AgentBackendClient } from '../core/backend-client.js';
import type { Config } from '../core/config.js';
import type { Db } from '../core/db.js';
import type { Logger } from '../core/logger.js';

/** Everything activities touch, injected so tests can pass real or fake parts without module mocks. */
export interface ActivityDeps {
  db: Db;
  backend: AgentBackendClient;
  config: Config;
  logger: Logger;
  clock?: () => Date;
  /** Whether a model takes images natively (docs/seeds/000 resolve_model_supports_vision); default: no. */
  modelSupportsVision?: (provider: string, model: string) => boolean;
}
