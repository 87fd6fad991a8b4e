/**
 * The studio's app administration (api/console/admin.ts) in the OpenAPI document (api/openapi/index.ts merges it):
 * an app's API keys (list, create — the key shown once —, revoke) and restoring a past agent version.
 */
import {
  ApiKeyListResponse,
  CreateApiKeyBody,
  CreatedApiKeyResponse,
  RestoreVersionBody,
  RestoreVersionResponse,
  RevokeApiKeyQuery,
  RevokeApiKeyResponse,
} from '../console/admin.js';
import { CopyAppBody } from '../console/apps.js';
import { PAGE_PARAMETERS } from '../pagination.js';
import { appIdParam, pathParam, queryParams } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

export const CONSOLE_ADMIN_REQUESTS = {
  CreateApiKeyRequest: CreateApiKeyBody,
  RestoreVersionRequest: RestoreVersionBody,
  CopyAppRequest: CopyAppBody,
};
export const CONSOLE_ADMIN_RESPONSES = { ApiKeyListResponse, CreatedApiKeyResponse, RestoreVersionResponse, RevokeApiKeyResponse };

export function consoleAdminPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const appId = appIdParam;
  return {
    '/console/api/apps/{app_id}': {
      delete: {
        operationId: 'deleteApp',
        tags: ['console'],
        security,
        parameters: [appId],
        summary:
          'Delete the app (api/console/apps.ts): its Temporal schedules, then its conversations and messages and the app with its ' +
          'agent, versions, drafts, workspaces, API keys (they stop working at once, on every replica), end users, annotations, ' +
          'schedules and webhooks. The credit ledger keeps its rows. 409 `app_busy` (extra `task_ids`) while a turn of the app is ' +
          'queued, running or waiting for a human: stop those first. Another tenant’s app: 404 `app_not_found`.',
        responses: { '204': { description: 'Deleted.' }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/copy': {
      post: {
        operationId: 'copyApp',
        tags: ['console'],
        security,
        parameters: [appId],
        summary:
          'A new app from this one (Dify’s copy): its shared draft config (checked as a save is; published as the copy’s ' +
          'version 1, with a shared draft from it), icon, description and multitask default. Not copied: conversations, ' +
          'messages, versions, build drafts, annotations, API keys, schedules, webhooks. Without `name`, "<name> (copy)" ' +
          '(or "(copy 2)", … when taken); a given name that is taken is 409 `app_name_taken`.',
        requestBody: { required: false, content: json(ref('CopyAppRequest')) },
        responses: { '201': { description: 'The copy.', content: json(ref('CreatedAppResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/api-keys': {
      get: {
        operationId: 'listAppApiKeys',
        tags: ['console'],
        security,
        parameters: [appId, ...PAGE_PARAMETERS],
        summary: "The app's API keys by prefix (never the key), newest first, revoked ones with revoked_at, a page at a time.",
        responses: { '200': { description: 'The keys.', content: json(ref('ApiKeyListResponse')) }, ...errors() },
      },
      post: {
        operationId: 'createAppApiKey',
        tags: ['console'],
        security,
        parameters: [appId],
        summary: 'A new API key of the app; the response carries the key this once (only its SHA-256 is stored).',
        requestBody: { required: false, content: json(ref('CreateApiKeyRequest')) },
        responses: { '201': { description: 'The key.', content: json(ref('CreatedApiKeyResponse')) }, ...errors() },
      },
    },
    '/console/api/apps/{app_id}/api-keys/{key_id}': {
      delete: {
        operationId: 'revokeAppApiKey',
        tags: ['console'],
        security,
        parameters: [appId, pathParam('key_id', 'Key id (from the list).'), ...queryParams(RevokeApiKeyQuery)],
        summary:
          'Revoke the key: every later /v1 request with it is a 401, and every stream opened with it (chat-messages, the events ' +
          're-attach, a blocking request waiting for its answer), on every api replica, ends with a last `error` event ' +
          '`api_key_revoked` (status 401; a blocking request: a 401 response). Its turns go on and are stored, unless ' +
          '`stop_turns=true`: then the turns it started that are still running, queued or waiting for a human are stopped as ' +
          'the stop endpoint stops them (each ends `stopped` with its partial answer and usage) and the response lists them. ' +
          'Revoking a revoked key is a no-op (with `stop_turns=true` it still stops what its turns left running). 404 `api_key_not_found`.',
        responses: {
          '200': { description: 'Revoked with `stop_turns=true`: the turns stopped.', content: json(ref('RevokeApiKeyResponse')) },
          '204': { description: 'Revoked.' },
          ...errors(),
        },
      },
    },
    '/console/api/apps/{app_id}/agent/versions/{version_id}/restore': {
      post: {
        operationId: 'restoreAgentVersion',
        tags: ['console'],
        security,
        parameters: [appId, pathParam('version_id', 'The past version (from the versions list).')],
        summary:
          'Restore a past version: `to: publish` publishes its config again as a new version (201), `to: draft` loads it into the ' +
          'shared draft (200). Validated again first: 400 `invalid_agent_config` when it no longer holds (a dataset deleted since).',
        requestBody: { required: false, content: json(ref('RestoreVersionRequest')) },
        responses: {
          '200': { description: 'Loaded into the draft.', content: json(ref('RestoreVersionResponse')) },
          '201': { description: 'Published as a new version.', content: json(ref('RestoreVersionResponse')) },
          ...errors(),
        },
      },
    },
  };
}
