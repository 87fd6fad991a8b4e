/**
 * The OpenAPI 3.1 document of the public service API, generated from the same zod schemas the routes
 * validate with (`z.toJSONSchema`, JSON Schema 2020-12 = OpenAPI 3.1's dialect), so the spec cannot
 * drift from the code. Request bodies and query strings are described as clients send them (`io:
 * input`: fields with defaults are optional), responses and SSE events as the api produces them.
 *
 * Why one file: it is the spec's table of routes, one entry per route, read top to bottom like the document it emits.
 */
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../../core/platform/project-root.js';
import { ERROR_CODES } from '../../core/protocol/error-codes.js';
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { pathParam, queryParams } from './params.js';
import * as S from '../schemas.js';
import { CONSOLE_REQUESTS, CONSOLE_RESPONSES, consoleAgentPaths } from './console.js';
import { CONSOLE_DEBUGGER_REQUESTS, CONSOLE_DEBUGGER_RESPONSES, consoleDebuggerPaths } from './console-debugger.js';
import { KNOWLEDGE_REQUESTS, KNOWLEDGE_RESPONSES, knowledgePaths } from './knowledge.js';
import { TOOL_REQUESTS, TOOL_RESPONSES, toolProviderPaths } from './tools.js';
import { MODEL_REQUESTS, MODEL_RESPONSES, modelProviderPaths } from './models.js';
import { MONITORING_RESPONSES, monitoringPaths } from './monitoring.js';
import { STUDIO_REQUESTS, STUDIO_RESPONSES, studioPaths } from './studio.js';
import { AUTOMATION_REQUESTS, AUTOMATION_RESPONSES, automationPaths } from './automation.js';
import { CONSOLE_ADMIN_REQUESTS, CONSOLE_ADMIN_RESPONSES, consoleAdminPaths } from './console-admin.js';
import { SSE_EVENTS, SseEvent } from '../../core/protocol/client-events.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** Schemas clients send (requests) and schemas the api returns (responses, events), by component name. */
const REQUESTS = {
  ChatRequest: S.ChatRequest,
  ChatFile: S.ChatFile,
  StopRequest: S.StopRequest,
  RenameConversationRequest: S.RenameConversationRequest,
  DeleteConversationRequest: S.DeleteConversationRequest,
  ForkConversationRequest: S.ForkConversationRequest,
  FeedbackRequest: S.FeedbackRequest,
  FileUploadForm: S.FileUploadForm,
  HumanInputSubmitRequest: S.HumanInputSubmitRequest,
  ...CONSOLE_REQUESTS,
  ...CONSOLE_DEBUGGER_REQUESTS,
  ...KNOWLEDGE_REQUESTS,
  ...TOOL_REQUESTS,
  ...MODEL_REQUESTS,
  ...STUDIO_REQUESTS,
  ...AUTOMATION_REQUESTS,
  ...CONSOLE_ADMIN_REQUESTS,
};
const RESPONSES = {
  ErrorResponse: S.ErrorResponse,
  SuccessResponse: S.SuccessResponse,
  SuggestedQuestionsResponse: S.SuggestedQuestionsResponse,
  ChatBlockingResponse: S.ChatBlockingResponse,
  ConversationResponse: S.ConversationResponse,
  ForkConversationResponse: S.ForkConversationResponse,
  ConversationListResponse: S.ConversationListResponse,
  MessageFileResponse: S.MessageFileResponse,
  AgentThoughtResponse: S.AgentThoughtResponse,
  MessageResponse: S.MessageResponse,
  MessageListResponse: S.MessageListResponse,
  UploadFileResponse: S.UploadFileResponse,
  ParametersResponse: S.ParametersResponse,
  AppInfoResponse: S.AppInfoResponse,
  HumanInputFormResponse: S.HumanInputFormResponse,
  HumanInputSubmitResponse: S.HumanInputSubmitResponse,
  ...SSE_EVENTS,
  SseEvent,
  ...CONSOLE_RESPONSES,
  ...CONSOLE_DEBUGGER_RESPONSES,
  ...KNOWLEDGE_RESPONSES,
  ...TOOL_RESPONSES,
  ...MODEL_RESPONSES,
  ...STUDIO_RESPONSES,
  ...MONITORING_RESPONSES,
  ...AUTOMATION_RESPONSES,
  ...CONSOLE_ADMIN_RESPONSES,
};

function components(schemas: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const out = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }).schemas;
  // The document's jsonSchemaDialect says 2020-12; a fragment-only $id is not a valid 2020-12 $id.
  return Object.fromEntries(Object.entries(out).map(([id, { $schema: _s, $id: _i, ...rest }]) => [id, rest as JsonSchema]));
}

const json = (schemaRef: JsonSchema) => ({ 'application/json': { schema: schemaRef } });
const ok = (description: string, id: string) => ({ description, content: json(ref(id)) });
const errors = (...statuses: number[]) =>
  Object.fromEntries([...new Set([400, 401, 404, ...statuses])].map((s) => [String(s), { $ref: `#/components/responses/Error${s}` }]));
const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (`invalid_param` names the field).',
  401: 'Missing, unknown or revoked app API key.',
  403: 'Invalid signature (`forbidden`), or a quota reached (`dataset_quota_exceeded`, `document_quota_exceeded`; per app or tenant: `schedule_quota_exceeded`, `webhook_quota_exceeded`).',
  404: 'Not found, or not visible to this app and user.',
  409: '`conversation_busy`, `conversation_waiting_for_human` or `agent_session_configuration_changed`.',
  412: '`human_input_form_submitted`, `human_input_form_expired` or `human_input_form_cancelled`.',
  413: "Body or file too large (`request_entity_too_large`, `file_too_large`, `document_too_large`), or the tenant's stored documents or uploads would exceed their quota (`storage_quota_exceeded`: TENANT_MAX_DOCUMENT_BYTES, TENANT_MAX_UPLOAD_BYTES).",
  415: '`unsupported_file_type`.',
  429: '`rate_limit_error`, or (`POST /v1/chat-messages` with a multitask strategy) `conversation_queue_full`: the conversation already has CONVERSATION_QUEUE_LIMIT messages waiting.',
  503: 'A dependency is unavailable (`service_unavailable`), or the deployment is at its cap of turns in flight (`server_busy`, nothing written); retry after `Retry-After`.',
};

const SSE_DESCRIPTION =
  'Server-sent events. Every frame is `id: <n>`, `event: <name>`, `data: <json>`, and the JSON repeats `event`. ' +
  'Resume with `Last-Event-ID`. The stream closes after `message_end` or `error`. Event schemas: ' +
  Object.keys(SSE_EVENTS).join(', ') +
  '.';
const sse = {
  'text/event-stream': { schema: ref('SseEvent'), 'x-sse-events': Object.fromEntries(Object.keys(SSE_EVENTS).map((id) => [id, ref(id)])) },
};

function paths(): Record<string, Record<string, JsonSchema>> {
  const conversationId = pathParam('conversation_id', 'Conversation id.');
  const taskId = pathParam('task_id', 'The message id returned in every event as `task_id`.');
  return {
    '/v1/chat-messages': {
      post: {
        operationId: 'createChatMessage',
        tags: ['chat'],
        summary: 'Send a message: starts a turn (a Temporal workflow) and streams its events, or blocks for the final message.',
        description:
          "Extension `multitask_strategy` (absent: the app's default, itself `reject`): when a turn of the conversation is in flight, " +
          '`reject` answers 409 `conversation_busy` (Dify); `enqueue` queues the message (the stream waits with pings, then streams its turn; ' +
          'history shows `turn_status: queued`); `interrupt` stops the turn in flight as a stop would, then runs this message; `rollback` ' +
          "also removes the stopped message from history and from the model's memory (its usage stays billed). 429 `conversation_queue_full` " +
          'when CONVERSATION_QUEUE_LIMIT messages wait.',
        requestBody: { required: true, content: json(ref('ChatRequest')) },
        responses: {
          '200': {
            description: `\`response_mode: streaming\` → ${SSE_DESCRIPTION} \`blocking\` → the final message.`,
            content: { ...sse, ...json(ref('ChatBlockingResponse')) },
          },
          ...errors(409, 413, 429, 503),
        },
      },
    },
    '/v1/chat-messages/{task_id}/stop': {
      post: {
        operationId: 'stopChatMessage',
        tags: ['chat'],
        summary: 'Stop a turn (workflow cancellation; the partial answer is kept). Idempotent.',
        parameters: [taskId],
        requestBody: { required: true, content: json(ref('StopRequest')) },
        responses: { '200': ok('Stop requested.', 'SuccessResponse'), ...errors() },
      },
    },
    '/v1/chat-messages/{task_id}/events': {
      get: {
        operationId: 'streamChatMessageEvents',
        tags: ['chat'],
        summary: "Extension: re-attach to a turn's event stream; honours `Last-Event-ID` (header) or `last_event_id` (query).",
        parameters: [
          taskId,
          ...queryParams(z.object({ user: S.UserId, last_event_id: z.string().optional() })),
          { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string' } },
        ],
        responses: { '200': { description: SSE_DESCRIPTION, content: sse }, ...errors() },
      },
    },
    '/v1/messages': {
      get: {
        operationId: 'getConversationMessages',
        tags: ['conversations'],
        summary:
          'Message history of a conversation, oldest first, with agent_thoughts, message_files and feedback: the thread of the branch ending at the newest message (or, extension, through `branch_id`), with parent_message_id and sibling_ids. Paginate backwards with first_id.',
        parameters: queryParams(S.MessagesQuery),
        responses: { '200': ok('A page of messages.', 'MessageListResponse'), ...errors() },
      },
    },
    '/v1/messages/{message_id}/feedbacks': {
      post: {
        operationId: 'messageFeedback',
        tags: ['conversations'],
        summary: "Like or dislike a message; `rating: null` removes this user's feedback.",
        parameters: [pathParam('message_id', 'Message id.')],
        requestBody: { required: true, content: json(ref('FeedbackRequest')) },
        responses: { '200': ok('Feedback stored.', 'SuccessResponse'), ...errors() },
      },
    },
    '/v1/messages/{message_id}/suggested': {
      get: {
        operationId: 'getSuggestedQuestions',
        tags: ['conversations'],
        summary:
          "Dify's next suggested questions after a message's answer: three questions from the agent's model (billed once per message, then served from a per-message store). " +
          "403 `app_suggested_questions_after_answer_disabled` when the agent's active config has `features.suggested_questions_after_answer` off; " +
          "404 `message_not_exists` when the message is not this user's; 409 `message_not_finished` while its turn is in flight; " +
          '400 `provider_quota_exceeded` or `completion_request_error` when the model cannot be called. A failed model call answers `data: []`.',
        parameters: [pathParam('message_id', 'Message id.'), ...queryParams(S.UserQuery.required({ user: true }))],
        responses: { '200': ok('The suggested questions.', 'SuggestedQuestionsResponse'), ...errors(403, 409) },
      },
    },
    '/v1/conversations': {
      get: {
        operationId: 'getConversations',
        tags: ['conversations'],
        summary: "The user's conversations (deleted ones excluded). Paginate with last_id.",
        parameters: queryParams(S.ConversationsQuery),
        responses: { '200': ok('A page of conversations.', 'ConversationListResponse'), ...errors() },
      },
    },
    '/v1/conversations/{conversation_id}/name': {
      post: {
        operationId: 'renameConversation',
        tags: ['conversations'],
        summary: 'Rename a conversation, or name it from its first query with `auto_generate: true`.',
        parameters: [conversationId],
        requestBody: { required: true, content: json(ref('RenameConversationRequest')) },
        responses: { '200': ok('The renamed conversation.', 'ConversationResponse'), ...errors() },
      },
    },
    '/v1/conversations/{conversation_id}/fork': {
      post: {
        operationId: 'forkConversation',
        tags: ['conversations'],
        summary:
          'Extension: a new conversation forked at `message_id`: a copy of the thread up to it, its own binding holding the session after it, and a copy of the workspace (`workspace_copy`: special files and entries changed under the copy are left out and listed, never an error). 413 `workspace_quota_exceeded` when the copy would pass `WORKSPACE_QUOTA_BYTES` or the tenant’s `TENANT_MAX_WORKSPACE_COPY_BYTES` (nothing is kept).',
        parameters: [conversationId],
        requestBody: { required: true, content: json(ref('ForkConversationRequest')) },
        responses: { '201': ok('The new conversation.', 'ForkConversationResponse'), ...errors() },
      },
    },
    '/v1/conversations/{conversation_id}': {
      delete: {
        operationId: 'deleteConversation',
        tags: ['conversations'],
        summary: 'Delete a conversation (soft delete; a running turn is cancelled). `user` in the JSON body or the query.',
        parameters: [conversationId, { name: 'user', in: 'query', required: false, schema: { type: 'string' } }],
        requestBody: { required: false, content: json(ref('DeleteConversationRequest')) },
        responses: { '204': { description: 'Deleted.' }, ...errors() },
      },
    },
    '/v1/parameters': {
      get: {
        operationId: 'getApplicationParameters',
        tags: ['app'],
        summary:
          "The app's parameters from the agent's active soul config: opening statement, suggested questions, file upload and size limits. " +
          'Only what really works is advertised: images when the model takes them natively (vision), documents when the agent has a workspace with a shell; retriever_resource when the agent retrieves from knowledge with that feature on (its answers carry citations).',
        parameters: queryParams(S.UserQuery),
        responses: { '200': ok('App parameters.', 'ParametersResponse'), ...errors() },
      },
    },
    '/v1/info': {
      get: {
        operationId: 'getAppInfo',
        tags: ['app'],
        summary: 'App name, description, tags and mode.',
        responses: { '200': ok('App info.', 'AppInfoResponse'), ...errors() },
      },
    },
    '/v1/meta': {
      get: {
        operationId: 'getAppMeta',
        tags: ['app'],
        summary: 'Tool icons (none for Agent Apps here).',
        responses: {
          '200': {
            description: 'App meta.',
            content: json({ type: 'object', properties: { tool_icons: { type: 'object' } }, required: ['tool_icons'] }),
          },
          ...errors(),
        },
      },
    },
    '/v1/files/upload': {
      post: {
        operationId: 'fileUpload',
        tags: ['files'],
        summary: 'Upload one file for use in chat messages (`local_file` + `upload_file_id`).',
        requestBody: { required: true, content: { 'multipart/form-data': { schema: ref('FileUploadForm') } } },
        responses: { '201': ok('The stored upload.', 'UploadFileResponse'), ...errors(413, 415) },
      },
    },
    '/v1/files/{file_id}/preview': {
      get: {
        operationId: 'filePreview',
        tags: ['files'],
        summary: "An upload's content, for the user who uploaded it.",
        parameters: [pathParam('file_id', 'Upload id.'), ...queryParams(S.FilePreviewQuery)],
        responses: { '200': { description: 'The file.', content: { 'application/octet-stream': {} } }, ...errors() },
      },
    },
    '/files/{file_id}/file-preview': {
      get: {
        operationId: 'signedFilePreview',
        tags: ['files'],
        summary:
          "An upload's content by its signed URL (the `url` of a file in message_files); no API key. Links expire (FILE_LINK_TTL_S; history hands out fresh ones) and stop working once the conversations that used the file are deleted.",
        security: [],
        parameters: [
          pathParam('file_id', 'Upload id.'),
          { name: 'expires', in: 'query', required: true, schema: { type: 'string' }, description: 'Expiry, unix seconds (signed).' },
          { name: 'sign', in: 'query', required: true, schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'The file.', content: { 'application/octet-stream': {} } }, ...errors(403, 404) },
      },
    },
    '/v1/form/human_input/{form_token}': {
      get: {
        operationId: 'getHumanInputForm',
        tags: ['forms'],
        summary: 'Read an ask_human form to render it (only the conversation’s user).',
        parameters: [
          { name: 'form_token', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'user', in: 'query', required: true, schema: { type: 'string' } },
        ],
        responses: { '200': ok('The form.', 'HumanInputFormResponse'), ...errors() },
      },
      post: {
        operationId: 'submitHumanInputForm',
        tags: ['forms'],
        summary: 'Submit an ask_human form; resumes the waiting turn as a new message.',
        parameters: [{ name: 'form_token', in: 'path', required: true, schema: { type: 'string' } }],
        requestBody: { required: true, content: json(ref('HumanInputSubmitRequest')) },
        responses: { '200': ok('Submitted; follow the continuation with the events route.', 'HumanInputSubmitResponse'), ...errors(412) },
      },
    },
    ...consoleAgentPaths(errors),
    ...consoleDebuggerPaths(errors, { description: SSE_DESCRIPTION, content: sse }),
    ...knowledgePaths(errors),
    ...toolProviderPaths(errors),
    ...modelProviderPaths(errors),
    ...studioPaths(errors),
    ...monitoringPaths(errors),
    ...automationPaths(errors),
    ...consoleAdminPaths(errors),
    '/healthz': {
      get: {
        operationId: 'healthz',
        tags: ['ops'],
        summary: 'The process is up.',
        security: [],
        responses: { '200': { description: 'Up.' } },
      },
    },
    '/readyz': {
      get: {
        operationId: 'readyz',
        tags: ['ops'],
        summary: 'Database, Temporal and the agent backend are reachable, and the credential watch listens.',
        security: [],
        responses: { '200': { description: 'Ready.' }, '503': { description: 'Not ready; `checks` says what is down.' } },
      },
    },
  };
}

function packageVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(projectRoot(import.meta.url), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

let cached: JsonSchema | null = null;

/** The service and console codes answered with `status`, from the registry. */
function codesOf(status: number): string {
  return Object.entries(ERROR_CODES)
    .filter(([, i]) => (i.status as readonly number[]).includes(status) && i.audience.some((a) => a === 'service' || a === 'console'))
    .map(([code]) => `\`${code}\``)
    .join(', ');
}

export function openApiDocument(): JsonSchema {
  if (cached) return cached;
  const responses = Object.fromEntries(
    Object.entries(ERROR_DESCRIPTIONS).map(([status, description]) => [
      `Error${status}`,
      { description: `${description} Codes: ${codesOf(Number(status))}.`, content: json(ref('ErrorResponse')) },
    ]),
  );
  cached = {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Dify-compatible Agent App service API',
      version: packageVersion(),
      description:
        "Dify's service API for Agent Apps (Dify's clients work unchanged), every turn a Temporal workflow. " +
        'Authenticate with `Authorization: Bearer <app api key>`. `user` scopes conversations to one end user of the app. ' +
        'Errors are `{code, message, status}`.',
    },
    tags: ['chat', 'conversations', 'app', 'files', 'forms', 'console', 'knowledge', 'tools', 'ops'].map((name) => ({ name })),
    security: [{ AppApiKey: [] }],
    paths: paths(),
    components: {
      securitySchemes: {
        AppApiKey: { type: 'http', scheme: 'bearer', description: 'App API key (`app-...`).' },
        ConsoleKey: { type: 'http', scheme: 'bearer', description: 'Console key of an account (console routes, tag `console`).' },
      },
      responses,
      schemas: { ...components(REQUESTS, 'input'), ...components(RESPONSES, 'output') },
    },
  };
  return cached;
}

export const openApiRoute: RequestHandler = (_req, res) => {
  res.json(openApiDocument());
};
