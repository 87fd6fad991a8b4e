/**
 * The console's model-provider routes in the OpenAPI document (api/openapi/index.ts merges them): the providers and their
 * catalogue models, the workspace's own credentials per provider (docs/models.md; routes in
 * api/console/model-providers.ts).
 */
import { z } from 'zod';
import { CatalogueModelView, CheckModelCredentialsBody, SaveModelCredentialsBody } from '../console/model-providers.js';
import { pathParam } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const Masked = z.record(z.string(), z.unknown()).describe('As saved, secrets masked (`sk-…7f3a`).');
const ModelProvider = z.object({
  provider: z.string(),
  system_hosted: z.boolean().describe('The deployment has credentials of its own for it (calls billed through the credit pool).'),
  credentials: Masked.nullable().describe("The workspace's own credentials, or null."),
  credentials_updated_at: z.number().int().nullable(),
  usable: z.boolean(),
  billed: z.boolean().describe('Calls are billed: hosted and the workspace has no credentials of its own.'),
  models: z.number().int().describe('Catalogue models.'),
});
const CatalogueModel = CatalogueModelView;
const ProviderError = z.object({ code: z.string(), error_type: z.string(), message: z.string() });

export const MODEL_REQUESTS = {
  SaveModelCredentialsRequest: SaveModelCredentialsBody,
  CheckModelCredentialsRequest: CheckModelCredentialsBody,
};

export const MODEL_RESPONSES = {
  ModelProviderListResponse: z.object({ data: z.array(ModelProvider) }),
  CatalogueModelListResponse: z.object({ provider: z.string(), data: z.array(CatalogueModel) }),
  ModelCredentialsResponse: z.object({ provider: z.string(), credentials: Masked, validated: z.boolean() }),
  ModelCredentialsCheckResponse: z.object({ provider: z.string(), valid: z.boolean(), error: ProviderError.optional() }),
};

export function modelProviderPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const provider = pathParam('provider', 'Provider name (`openai`, `anthropic`, …).', { type: 'string' });
  const op = (o: JsonSchema, parameters: JsonSchema[] = [provider]): JsonSchema => ({ tags: ['models'], security, parameters, ...o });
  const ok = (description: string, schema: string) => ({ '200': { description, content: json(ref(schema)) } });
  return {
    '/console/api/model-providers': {
      get: op(
        {
          operationId: 'listModelProviders',
          summary: "The deployment's model providers: hosted or not, the workspace's credentials (masked).",
          responses: { ...ok('Providers.', 'ModelProviderListResponse'), ...errors() },
        },
        [],
      ),
    },
    '/console/api/model-providers/{provider}/models': {
      get: op({
        operationId: 'listCatalogueModels',
        summary: "A provider's catalogue models: features, bounds, prices (what a model picker shows).",
        responses: { ...ok('Models.', 'CatalogueModelListResponse'), ...errors() },
      }),
    },
    '/console/api/model-providers/{provider}/credentials': {
      put: op({
        operationId: 'saveModelCredentials',
        summary:
          "Add or rotate the workspace's credentials; checked first with a real one-word call unless `validate: false` " +
          '(400 `provider_credentials_invalid` with the provider’s error).',
        requestBody: { required: true, content: json(ref('SaveModelCredentialsRequest')) },
        responses: { ...ok('Saved (masked).', 'ModelCredentialsResponse'), ...errors() },
      }),
      delete: op({
        operationId: 'deleteModelCredentials',
        summary: "Delete the workspace's credentials for the provider.",
        responses: { '204': { description: 'Deleted.' }, ...errors() },
      }),
    },
    '/console/api/model-providers/{provider}/credentials/validate': {
      post: op({
        operationId: 'checkModelCredentials',
        summary: 'Check the given credentials, else the saved ones, with a real one-word call; nothing is saved.',
        requestBody: { required: false, content: json(ref('CheckModelCredentialsRequest')) },
        responses: { ...ok('The verdict.', 'ModelCredentialsCheckResponse'), ...errors() },
      }),
    },
  };
}
