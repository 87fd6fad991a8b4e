/**
 * The studio's console reads (api/routes/studio.ts) in the OpenAPI document (api/openapi.ts merges them): the
 * tenant's agent apps, one version's config, and a turn's run facts (workflow, Temporal UI link, backend run id).
 */
import { AgentVersionResponse, StudioAppList, TurnRunResponse } from './routes/studio.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

export const STUDIO_RESPONSES = { StudioAppListResponse: StudioAppList, AgentVersionResponse, TurnRunResponse };

export function studioPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const uuid = (name: string, description: string) => ({
    name,
    in: 'path',
    required: true,
    description,
    schema: { type: 'string', format: 'uuid' },
  });
  const appId = uuid('app_id', 'App id.');
  return {
    '/console/api/apps': {
      get: {
        operationId: 'listStudioApps',
        tags: ['console'],
        security,
        summary: "The caller's tenant's agent apps, oldest first (never another tenant's).",
        responses: { '200': { description: 'The apps.', content: json(ref('StudioAppListResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/agent/versions/{version_id}': {
      get: {
        operationId: 'getAgentVersion',
        tags: ['console'],
        security,
        parameters: [appId, uuid('version_id', 'Version id (from the versions list).')],
        summary: "One published version with its config (the studio diffs two). 404 `agent_version_not_found` for another agent's version.",
        responses: { '200': { description: 'The version.', content: json(ref('AgentVersionResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/agent/messages/{message_id}/run': {
      get: {
        operationId: 'getTurnRun',
        tags: ['console'],
        security,
        parameters: [appId, uuid('message_id', 'A message (turn) of the app, service or debugger.')],
        summary:
          "A turn's run facts for the studio's inspector: status, error, usage, its Temporal workflow id with a link into the " +
          "Temporal UI (when TEMPORAL_UI_URL is known) and the agent backend run id. 404 `message_not_found` for another app's message.",
        responses: { '200': { description: 'The run facts.', content: json(ref('TurnRunResponse')) }, ...errors() },
      },
    },
  };
}
