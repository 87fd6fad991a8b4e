/**
 * The console's agent-config routes in the OpenAPI document (api/openapi.ts merges them): drafts, publish and
 * versions, under the console key. Kept beside the main table so the console's schemas (the soul config, the
 * `invalid_agent_config` answer) live in one place; the routes are api/routes/console.ts.
 */
import { z } from 'zod';
import { AgentSoulConfig } from '../core/soul.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const SoulIssueResponse = z.object({
  path: z.string().describe('The field, as `tools.core[0]`; empty for the config as a whole.'),
  message: z.string(),
});

/** Schemas clients send. */
export const CONSOLE_REQUESTS = {
  AgentSoulConfig,
  AgentDraftRequest: z.object({ config: AgentSoulConfig }),
  PublishRequest: z.object({ from: z.enum(['draft', 'build-draft']).default('draft') }),
};

/** Schemas the console answers with. */
export const CONSOLE_RESPONSES = {
  AgentDraftResponse: z.object({
    id: z.string(),
    draft_type: z.enum(['DRAFT', 'BUILD_DRAFT']),
    config: z.record(z.string(), z.unknown()),
    base_version_id: z.string().nullable(),
    updated_at: z.number().int(),
  }),
  PublishResponse: z.object({ id: z.string(), version: z.number().int(), created_at: z.number().int() }),
  AgentVersionListResponse: z.object({
    data: z.array(
      z.object({
        id: z.string(),
        version: z.number().int(),
        active: z.boolean(),
        created_by: z.string().nullable(),
        created_at: z.number().int(),
      }),
    ),
  }),
  InvalidAgentConfigResponse: z.object({
    code: z.literal('invalid_agent_config'),
    message: z.string().describe('Every issue as `<field>: <problem>`, joined by `; `.'),
    status: z.literal(400),
    issues: z.array(SoulIssueResponse),
  }),
};

const INVALID_CONFIG = {
  description:
    '`invalid_agent_config`: the config cannot run here — its schema, a dataset or tool provider that does not exist in the tenant, ' +
    "or the agent backend's registry (a module this deployment cannot run, e.g. runtime/shell without SHELLCTL_AUTH_TOKEN). " +
    'Nothing is saved. Other 400s: `invalid_param` for the body around the config.',
  content: json(ref('InvalidAgentConfigResponse')),
};

/**
 * The path entries; `errors` builds the shared error responses of api/openapi.ts (400/401/404 always). The
 * routes that check a config answer the specific 400 instead.
 */
export function consoleAgentPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const appId = { name: 'app_id', in: 'path', required: true, description: 'App id.', schema: { type: 'string', format: 'uuid' } };
  const security = [{ ConsoleKey: [] }];
  const op = (o: JsonSchema): JsonSchema => ({ tags: ['console'], security, parameters: [appId], ...o });
  const checked = (description: string, id: string, status = '200') => ({
    [status]: { description, content: json(ref(id)) },
    ...errors(),
    '400': INVALID_CONFIG,
  });
  const draftBody = { required: true, content: json(ref('AgentDraftRequest')) };
  return {
    '/console/api/apps/{app_id}/agent/draft': {
      get: op({
        operationId: 'getAgentDraft',
        summary: "The agent's shared draft.",
        responses: { '200': { description: 'The draft.', content: json(ref('AgentDraftResponse')) }, ...errors() },
      }),
      put: op({
        operationId: 'putAgentDraft',
        summary: "Replace the shared draft's config (edited in place); validated before it is saved.",
        requestBody: draftBody,
        responses: checked('The saved draft.', 'AgentDraftResponse'),
      }),
    },
    '/console/api/apps/{app_id}/agent/build-draft': {
      get: op({
        operationId: 'getAgentBuildDraft',
        summary: "The caller's personal build draft (404 `agent_build_draft_not_found` when there is none).",
        responses: { '200': { description: 'The build draft.', content: json(ref('AgentDraftResponse')) }, ...errors() },
      }),
      put: op({
        operationId: 'putAgentBuildDraft',
        summary: "Create or replace the caller's build draft; validated before it is saved.",
        requestBody: draftBody,
        responses: checked('The saved build draft.', 'AgentDraftResponse'),
      }),
    },
    '/console/api/apps/{app_id}/agent/publish': {
      post: op({
        operationId: 'publishAgent',
        summary:
          'Publish a draft as a new immutable version (new conversations use it). The draft is validated again: one saved before ' +
          'these checks, or whose dataset was deleted since, is refused.',
        requestBody: { required: false, content: json(ref('PublishRequest')) },
        responses: checked('The new version.', 'PublishResponse', '201'),
      }),
    },
    '/console/api/apps/{app_id}/agent/versions': {
      get: op({
        operationId: 'listAgentVersions',
        summary: "The agent's published versions, newest first.",
        responses: { '200': { description: 'The versions.', content: json(ref('AgentVersionListResponse')) }, ...errors() },
      }),
    },
  };
}
