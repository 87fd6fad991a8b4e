/**
 * The console's tool-provider routes in the OpenAPI document (api/openapi/index.ts merges them): API tools from an OpenAPI 3
 * document and MCP servers, under the console key (docs/tools.md; routes in api/console/tool-providers.ts).
 */
import { z } from 'zod';
import { PAGE_PARAMETERS, pageSchema } from '../pagination.js';
import { CreateToolProviderBody, ToolProviderCredentialsBody } from '../console/tool-providers.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const ToolProvider = z.object({
  id: z.string(),
  name: z.string().describe('The prefix of its tools’ model-facing names.'),
  kind: z.enum(['api', 'mcp']),
  description: z.string(),
  server_url: z.string(),
  auth: z
    .record(z.string(), z.unknown())
    .describe('api: `{type, name?, secret?}`; mcp: `{headers: {name: masked}}`. Secrets are masked (`****` + at most the last 4).'),
  tools: z.array(
    z.object({
      name: z.string(),
      model_name: z.string().describe('`<provider>__<tool>`, the name the model calls.'),
      description: z.string(),
      parameters: z.record(z.string(), z.unknown()).describe('JSON schema of the arguments.'),
    }),
  ),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const Skipped = z.array(z.record(z.string(), z.string())).describe('Operations or MCP tools left out, and why.');

export const TOOL_REQUESTS = {
  CreateToolProviderRequest: CreateToolProviderBody,
  ToolProviderCredentialsRequest: ToolProviderCredentialsBody,
};

export const TOOL_RESPONSES = {
  ToolProviderResponse: ToolProvider,
  ToolProviderCreatedResponse: ToolProvider.extend({ skipped: Skipped }),
  ToolProviderListResponse: pageSchema(ToolProvider),
};

export function toolProviderPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const name = { name: 'name', in: 'path', required: true, description: 'Provider name.', schema: { type: 'string' } };
  const op = (o: JsonSchema, parameters: JsonSchema[] = []): JsonSchema => ({ tags: ['tools'], security, parameters, ...o });
  const ok = (description: string, schema: string, status = '200') => ({ [status]: { description, content: json(ref(schema)) } });
  return {
    '/console/api/tool-providers': {
      post: op({
        operationId: 'createToolProvider',
        summary:
          'Add an API tool provider from an OpenAPI 3 document (JSON or YAML; each operation becomes a tool) with its auth, ' +
          'or an MCP server (streamable HTTP; its tools are listed now). 400 `invalid_openapi`, `invalid_server_url` (SSRF ' +
          'guard), `mcp_server_unreachable`; 409 `tool_provider_exists`.',
        requestBody: { required: true, content: json(ref('CreateToolProviderRequest')) },
        responses: { ...ok('The provider (secrets masked).', 'ToolProviderCreatedResponse', '201'), ...errors(409) },
      }),
      get: op({
        operationId: 'listToolProviders',
        summary: "The tenant's tool providers (secrets masked), by name, a page at a time.",
        parameters: PAGE_PARAMETERS,
        responses: { ...ok('Providers.', 'ToolProviderListResponse'), ...errors() },
      }),
    },
    '/console/api/tool-providers/{name}': {
      get: op(
        {
          operationId: 'getToolProvider',
          summary: 'One provider.',
          responses: { ...ok('The provider.', 'ToolProviderResponse'), ...errors() },
        },
        [name],
      ),
      delete: op(
        {
          operationId: 'deleteToolProvider',
          summary: 'Delete a provider; 409 `tool_provider_in_use` while an agent draft or active config uses it.',
          responses: { '204': { description: 'Deleted.' }, ...errors(409) },
        },
        [name],
      ),
    },
    '/console/api/tool-providers/{name}/credentials': {
      put: op(
        {
          operationId: 'updateToolProviderCredentials',
          summary: 'Replace the credentials: `{auth}` of an API provider, `{headers}` of an MCP provider.',
          requestBody: { required: true, content: json(ref('ToolProviderCredentialsRequest')) },
          responses: { ...ok('The provider.', 'ToolProviderResponse'), ...errors() },
        },
        [name],
      ),
    },
    '/console/api/tool-providers/{name}/refresh': {
      post: op(
        {
          operationId: 'refreshToolProvider',
          summary: "List an MCP server's tools again (400 `refresh_not_supported` for API providers).",
          responses: { ...ok('The provider.', 'ToolProviderCreatedResponse'), ...errors() },
        },
        [name],
      ),
    },
  };
}
