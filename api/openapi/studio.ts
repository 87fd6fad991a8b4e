/**
 * The studio's console reads (api/console/studio.ts) in the OpenAPI document (api/openapi/index.ts merges them): the
 * tenant's agent apps, one version's config, the app's annotations, and a turn's run facts (workflow, Temporal UI link, backend run id).
 */
import { z } from 'zod';
import { AnnotationBody, AnnotationSettings } from '../console/agent.js';
import { CreateAppBody, CreatedAppResponse } from '../console/admin.js';
import {
  AgentVersionResponse,
  AnnotationListResponse,
  BuiltinToolListResponse,
  ModelInputsResponse,
  StudioAppList,
  TurnRunResponse,
} from '../console/studio.js';
import { PAGE_PARAMETERS } from '../pagination.js';
import { appIdParam, pathParam } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

export const STUDIO_REQUESTS = {
  AnnotationRequest: AnnotationBody,
  AnnotationSettingsRequest: AnnotationSettings,
  CreateAppRequest: CreateAppBody,
};

const Annotation = z.object({
  id: z.uuid(),
  question: z.string(),
  content: z.string(),
  hit_count: z.number().int(),
  created_at: z.number().int(),
});

export const STUDIO_RESPONSES = {
  AnnotationResponse: Annotation,
  AnnotationSettingsResponse: z.object({ enabled: z.boolean(), score_threshold: z.number() }),
  StudioAppListResponse: StudioAppList,
  CreatedAppResponse,
  AgentVersionResponse,
  AnnotationListResponse,
  TurnRunResponse,
  ModelInputsResponse,
  BuiltinToolListResponse,
};

export function studioPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const appId = appIdParam;
  return {
    '/console/api/builtin-tools': {
      get: {
        operationId: 'listBuiltinTools',
        tags: ['console'],
        security,
        summary:
          'The builtin tool shelf an agent config picks from in `tools.core` (docs/tools.md "Built-in tools"): each tool’s name, ' +
          'label, what the model reads, and the JSON schema of its arguments, from the contract the agent backend runs them by.',
        responses: { '200': { description: 'The shelf.', content: json(ref('BuiltinToolListResponse')) }, ...errors() },
      },
    },
    '/console/api/apps': {
      get: {
        operationId: 'listStudioApps',
        tags: ['console'],
        security,
        parameters: PAGE_PARAMETERS,
        summary: "The caller's tenant's agent apps, oldest first (never another tenant's), a page at a time.",
        responses: { '200': { description: 'The apps.', content: json(ref('StudioAppListResponse')) }, ...errors() },
      },
      post: {
        operationId: 'createAgentApp',
        tags: ['console'],
        security,
        summary:
          'A new agent app (the studio’s New agent): name, icon, description, model and system prompt over the demo agent’s tools, ' +
          'checked as a draft save is (400 `invalid_agent_config` with `issues`), published as version 1 with a shared draft. ' +
          '409 `app_name_taken` when the workspace has an app of that name.',
        requestBody: { required: true, content: json(ref('CreateAppRequest')) },
        responses: { '201': { description: 'The app and its first config.', content: json(ref('CreatedAppResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/agent/versions/{version_id}': {
      get: {
        operationId: 'getAgentVersion',
        tags: ['console'],
        security,
        parameters: [appId, pathParam('version_id', 'Version id (from the versions list).')],
        summary: "One published version with its config (the studio diffs two). 404 `agent_version_not_found` for another agent's version.",
        responses: { '200': { description: 'The version.', content: json(ref('AgentVersionResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/annotations': {
      get: {
        operationId: 'listAnnotations',
        tags: ['console'],
        security,
        parameters: [appId, ...PAGE_PARAMETERS],
        summary: "The app's annotations (question, answer, hits), newest first, a page at a time.",
        responses: { '200': { description: 'The annotations.', content: json(ref('AnnotationListResponse')) }, ...errors() },
      },
      post: {
        operationId: 'createAnnotation',
        tags: ['console'],
        security,
        parameters: [appId],
        summary:
          'Add an annotation: a question and the answer given instead of the agent when annotation reply is on and a query is similar enough.',
        requestBody: { required: true, content: json(ref('AnnotationRequest')) },
        responses: { '201': { description: 'The annotation.', content: json(ref('AnnotationResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/annotation-settings': {
      put: {
        operationId: 'putAnnotationSettings',
        tags: ['console'],
        security,
        parameters: [appId],
        summary: 'Turn annotation reply on or off and set its pg_trgm similarity threshold (0–1).',
        requestBody: { required: true, content: json(ref('AnnotationSettingsRequest')) },
        responses: { '200': { description: 'The settings.', content: json(ref('AnnotationSettingsResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/agent/messages/{message_id}/model-inputs': {
      get: {
        operationId: 'getTurnModelInputs',
        tags: ['console'],
        security,
        parameters: [appId, pathParam('message_id', 'A message (turn) of the app, service or debugger.')],
        summary:
          'What each model request of the turn was sent, as the inner LLM endpoint received it: system, history, user, ' +
          'knowledge block, assistant tool calls, tool results and tool definitions, each with its token count (texts capped ' +
          "at 4000 characters). 404 `message_not_found` for another app's or tenant's message.",
        responses: { '200': { description: 'The model inputs.', content: json(ref('ModelInputsResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/agent/messages/{message_id}/run': {
      get: {
        operationId: 'getTurnRun',
        tags: ['console'],
        security,
        parameters: [appId, pathParam('message_id', 'A message (turn) of the app, service or debugger.')],
        summary:
          "A turn's run facts for the studio's inspector: status, error, usage, its Temporal workflow id with a link into the " +
          "Temporal UI (when TEMPORAL_UI_URL is known) and the agent backend run id. 404 `message_not_found` for another app's message.",
        responses: { '200': { description: 'The run facts.', content: json(ref('TurnRunResponse')) }, ...errors() },
      },
    },
  };
}
