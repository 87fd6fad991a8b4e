/**
 * The console's agent-config routes in the OpenAPI document (api/openapi/index.ts merges them): drafts, publish and
 * versions, under the console key. Kept beside the main table so the console's schemas (the soul config, the
 * `invalid_agent_config` answer) live in one place; the routes are api/console/agent.ts.
 */
import { z } from 'zod';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { PAGE_PARAMETERS, pageSchema } from '../pagination.js';
import { MultitaskSettings } from '../schemas.js';
import { MULTITASK_STRATEGIES } from '../../core/protocol/workflow-contract.js';
import { appIdParam } from './params.js';

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
  AgentBuildDraftRequest: z.object({
    config: AgentSoulConfig,
    base_revision: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'The shared draft revision this build draft now builds on (after merging its changes in by hand): a later merge is clean ' +
          'if the shared draft is still there. Omitted: a new build draft is based on the current shared draft, a saved one keeps its base.',
      ),
  }),
  MergeBuildDraftRequest: z.object({
    force: z.boolean().default(false).describe('Replace the shared draft even if it changed since the build draft’s base revision.'),
  }),
  PublishRequest: z.object({ from: z.enum(['draft', 'build-draft']).default('draft') }),
  MultitaskSettingsRequest: MultitaskSettings,
};

const AgentDraftResponse = z.object({
  id: z.string(),
  draft_type: z.enum(['DRAFT', 'BUILD_DRAFT']),
  config: z.record(z.string(), z.unknown()),
  base_version_id: z.string().nullable().describe('The published version this draft started from, or was last published as.'),
  revision: z.number().int().describe('Bumped on every save of the config.'),
  base_revision: z
    .number()
    .int()
    .nullable()
    .describe('Build drafts: the shared draft revision this one is based on (forked, merged or rebased); null when unknown.'),
  updated_at: z.number().int(),
});

/** Schemas the console answers with. */
export const CONSOLE_RESPONSES = {
  AgentDraftResponse,
  PublishResponse: z.object({ id: z.string(), version: z.number().int(), created_at: z.number().int() }),
  MultitaskSettingsResponse: z.object({ default_strategy: z.enum(MULTITASK_STRATEGIES), queue_limit: z.number().int() }),
  AgentVersionListResponse: pageSchema(
    z.object({
      id: z.string(),
      version: z.number().int(),
      active: z.boolean(),
      created_by: z.string().nullable(),
      created_at: z.number().int(),
    }),
  ),
  AgentLogResponse: z.object({
    meta: z.object({
      status: z.string().describe('`success`, `failed`, or the turn status while it runs (`running`, `paused`, `stopped`).'),
      executor: z.enum(['end_user', 'account']),
      start_time: z.string(),
      elapsed_time: z.number().describe('Seconds.'),
      total_tokens: z.number().int(),
      agent_mode: z.literal('function_call'),
      iterations: z.number().int(),
      queue_position: z
        .number()
        .int()
        .min(1)
        .nullable()
        .describe("Extension: a queued message's place in its conversation's line (1 = next); null once it runs."),
    }),
    iterations: z.array(
      z.object({
        call_index: z.number().int().nullable().describe('The model request of the run; null for rows recorded before issue 18.'),
        tokens: z.number().int(),
        prompt_tokens: z.number().int(),
        completion_tokens: z.number().int(),
        total_price: z.string(),
        currency: z.string(),
        latency: z.number().nullable().describe('Seconds from the request to the end of its response stream.'),
        thought: z.string(),
        tool_calls: z.array(
          z.object({
            status: z.enum(['success', 'error']),
            error: z.string().nullable(),
            time_cost: z.number().describe('Seconds.'),
            tool_name: z.string(),
            tool_label: z.unknown(),
            tool_input: z.unknown(),
            tool_output: z.unknown(),
            tool_parameters: z.record(z.string(), z.unknown()),
            tool_icon: z.null(),
          }),
        ),
        tool_raw: z.object({ inputs: z.string(), outputs: z.string() }),
        created_at: z.string(),
        files: z.array(z.string()),
      }),
    ),
    files: z.array(
      z
        .object({
          id: z.string(),
          type: z.string(),
          belongs_to: z.string(),
          filename: z.string().nullable(),
          mime_type: z.string().nullable(),
          size: z.number().int().nullable(),
        })
        .describe("As the history's `message_files` (also url, transfer_method, upload_file_id)."),
    ),
  }),
  MergeBuildDraftResponse: z.object({
    /** The shared draft, now holding the build draft's config. */
    draft: AgentDraftResponse,
    /** Your build draft, now based on the merged revision. */
    build_draft: AgentDraftResponse,
  }),
  DraftConflictResponse: z.object({
    code: z.literal('agent_draft_conflict'),
    message: z.string(),
    status: z.literal(409),
    shared_revision: z.number().int().describe('Where the shared draft is now.'),
    base_revision: z.number().int().nullable().describe('Where your build draft is based.'),
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
 * The path entries; `errors` builds the shared error responses of api/openapi/index.ts (400/401/404 always). The
 * routes that check a config answer the specific 400 instead.
 */
export function consoleAgentPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const appId = appIdParam;
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
        requestBody: { required: true, content: json(ref('AgentBuildDraftRequest')) },
        responses: checked('The saved build draft.', 'AgentDraftResponse'),
      }),
      delete: op({
        operationId: 'deleteAgentBuildDraft',
        summary: "Discard the caller's build draft; its binding (session and workspace) is retired.",
        responses: { '204': { description: 'Discarded.' }, ...errors() },
      }),
    },
    '/console/api/apps/{app_id}/agent/build-draft/merge': {
      post: op({
        operationId: 'mergeAgentBuildDraft',
        summary:
          "Merge the caller's build draft into the shared draft (its config replaces the shared draft's, validated again). Clean when the " +
          'shared draft is still at the build draft’s `base_revision`; otherwise nothing changes and the answer is 409 ' +
          '`agent_draft_conflict`, unless `force`. The build draft stays, based on the merged revision; its session ends (binding and workspace retired).',
        requestBody: { required: false, content: json(ref('MergeBuildDraftRequest')) },
        responses: {
          ...checked('Merged.', 'MergeBuildDraftResponse'),
          '409': {
            description: '`agent_draft_conflict`: the shared draft changed since your base revision.',
            content: json(ref('DraftConflictResponse')),
          },
        },
      }),
    },
    '/console/api/apps/{app_id}/agent/publish': {
      post: op({
        operationId: 'publishAgent',
        summary:
          'Publish a draft — the shared draft (`from: draft`) or your build draft (`from: build-draft`) — as a new immutable version ' +
          '(new conversations use it; the draft is then based on it). The draft is validated again: one saved before ' +
          'these checks, or whose dataset was deleted since, is refused.',
        requestBody: { required: false, content: json(ref('PublishRequest')) },
        responses: checked('The new version.', 'PublishResponse', '201'),
      }),
    },
    '/console/api/apps/{app_id}/multitask-settings': {
      get: op({
        operationId: 'getMultitaskSettings',
        summary: "The app's default multitask strategy (chat requests without `multitask_strategy`) and the queue limit.",
        parameters: [appId],
        responses: { '200': { description: 'The settings.', content: json(ref('MultitaskSettingsResponse')) }, ...errors() },
      }),
      put: op({
        operationId: 'setMultitaskSettings',
        summary: 'Set the default multitask strategy: `reject` (Dify, the default), `enqueue`, `interrupt` or `rollback`.',
        parameters: [appId],
        requestBody: { required: true, content: json(ref('MultitaskSettingsRequest')) },
        responses: { '200': { description: 'The settings.', content: json(ref('MultitaskSettingsResponse')) }, ...errors() },
      }),
    },
    '/console/api/apps/{app_id}/agent/versions': {
      get: op({
        operationId: 'listAgentVersions',
        summary: "The agent's published versions, newest first, a page at a time.",
        parameters: [appId, ...PAGE_PARAMETERS],
        responses: { '200': { description: 'The versions.', content: json(ref('AgentVersionListResponse')) }, ...errors() },
      }),
    },
    '/console/api/apps/{app_id}/agent/logs': {
      get: {
        ...op({
          operationId: 'getAgentLog',
          summary:
            "A turn's agent log (Dify's shape): one iteration per model request with its tokens, price and latency, the thought " +
            'text it produced and its tool calls (input, output, time cost, error). 404 `message_not_found` for a message of ' +
            'another conversation or app.',
          responses: { '200': { description: 'The log.', content: json(ref('AgentLogResponse')) }, ...errors() },
        }),
        parameters: [
          appId,
          { name: 'conversation_id', in: 'query', required: true, schema: { type: 'string', format: 'uuid' } },
          { name: 'message_id', in: 'query', required: true, schema: { type: 'string', format: 'uuid' } },
        ],
      },
    },
  };
}
