/**
 * The console's debugger routes in the OpenAPI document (api/openapi/index.ts merges them): start a debugger turn, list the
 * caller's debugger conversations and messages, re-attach, stop, and read/submit a debugger turn's ask_human form.
 * The routes are api/console/agent.ts (start) and api/console/debugger.ts (the rest); request schemas are
 * the ones those routes validate with.
 */
import { z } from 'zod';
import { appIdParam, pathParam, queryParams } from './params.js';
import { DebugChat, DebugConversationsQuery, DebugFormSubmitRequest, DebugMessagesQuery } from '../console/debugger.js';
import { ConversationResponse, FileUploadForm, MessageResponse, Uuid } from '../schemas.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

export const CONSOLE_DEBUGGER_REQUESTS = {
  DebugChatRequest: DebugChat,
  DebugFormSubmitRequest,
  /** The multipart form of …/debug/files/upload (documentation only: parsed by busboy): no `user`, the account owns it. */
  DebugFileUploadForm: FileUploadForm.omit({ user: true }),
};

export const CONSOLE_DEBUGGER_RESPONSES = {
  DebugConversationListResponse: z.object({
    limit: z.number().int(),
    has_more: z.boolean(),
    data: z.array(
      ConversationResponse.extend({
        active_message_id: Uuid.nullable().describe('The turn in flight (running or waiting for its form): re-attach or stop it.'),
      }),
    ),
  }),
  DebugMessageListResponse: z.object({
    limit: z.number().int(),
    has_more: z.boolean(),
    data: z.array(MessageResponse.extend({ draft_type: z.enum(['DRAFT', 'BUILD_DRAFT']).describe('The draft the turn ran on.') })),
  }),
  DebugSuggestedQuestionsResponse: z.object({
    data: z.array(z.string()).max(3).describe('Up to three questions, in order (none when the model answered none).'),
  }),
};

const NOT_YOURS = ' Only the account that started the debugger turn sees it: another account of the tenant, or another tenant, gets 404.';

/** `errors` builds the shared error responses of api/openapi/index.ts; `sse` is its event-stream response. */
export function consoleDebuggerPaths(
  errors: (...statuses: number[]) => Record<string, unknown>,
  sse: { description: string; content: JsonSchema },
): Record<string, Record<string, JsonSchema>> {
  const appId = appIdParam;
  const taskId = pathParam('task_id', 'The message id of a debugger turn (`task_id` in its events).');
  const formToken = pathParam('form_token', 'The form token of `human_input_required`.', { type: 'string' });
  const op = (o: JsonSchema, ...params: JsonSchema[]): JsonSchema => ({
    tags: ['console'],
    security: [{ ConsoleKey: [] }],
    ...o,
    parameters: [appId, ...params],
  });
  const base = '/console/api/apps/{app_id}/agent/debug';
  return {
    [`${base}/chat-messages`]: {
      post: op({
        operationId: 'createDebugChatMessage',
        summary:
          'Start a debugger turn (invoke_from `debugger`) on the shared draft (`draft: draft`) or on your build draft (`draft: build`, ' +
          'which owns its own session) and stream its events. A turn paused by ask_human resumes on the same draft. `files` as in ' +
          'POST /v1/chat-messages (your uploads from …/debug/files/upload, or remote URLs), accepted or refused as there, by the draft.',
        requestBody: { required: true, content: json(ref('DebugChatRequest')) },
        responses: { '200': sse, ...errors(409, 429, 503) },
      }),
    },
    [`${base}/files/upload`]: {
      post: op({
        operationId: 'uploadDebugFile',
        summary:
          'Upload one file for your debugger turns (`files: [{transfer_method: local_file, upload_file_id}]`): the same kinds, sizes and ' +
          'quota as POST /v1/files/upload; the upload is yours (no `user`), and only your debugger turns of this app may use it. ' +
          'A turn accepts it by its draft: images with a vision model or a workspace and shell, documents with a workspace and shell.',
        requestBody: { required: true, content: { 'multipart/form-data': { schema: ref('DebugFileUploadForm') } } },
        responses: { '201': { description: 'The stored upload.', content: json(ref('UploadFileResponse')) }, ...errors(413, 415) },
      }),
    },
    [`${base}/conversations`]: {
      get: op(
        {
          operationId: 'listDebugConversations',
          summary: 'Your debugger conversations of this app, most recently updated first; paginate with `last_id`.' + NOT_YOURS,
          responses: {
            '200': { description: 'A page of conversations.', content: json(ref('DebugConversationListResponse')) },
            ...errors(),
          },
        },
        ...queryParams(DebugConversationsQuery),
      ),
    },
    [`${base}/messages`]: {
      get: op(
        {
          operationId: 'listDebugMessages',
          summary:
            'Messages of one of your debugger conversations, oldest first, like GET /v1/messages; paginate backwards with `first_id`.' +
            NOT_YOURS,
          responses: { '200': { description: 'A page of messages.', content: json(ref('DebugMessageListResponse')) }, ...errors() },
        },
        ...queryParams(DebugMessagesQuery),
      ),
    },
    [`${base}/messages/{message_id}/suggested-questions`]: {
      get: op(
        {
          operationId: 'getDebugSuggestedQuestions',
          summary:
            "Dify's console twin of GET /v1/messages/{message_id}/suggested for one of your debugger answers: `{data: [questions]}` when the " +
            'draft the turn ran on has `features.suggested_questions_after_answer` on (403 `app_suggested_questions_after_answer_disabled` ' +
            'otherwise, 409 `message_not_finished` while the turn runs), from the same per-message store and billing.' +
            NOT_YOURS,
          responses: {
            '200': { description: 'The suggested questions.', content: json(ref('DebugSuggestedQuestionsResponse')) },
            ...errors(403, 409),
          },
        },
        pathParam('message_id', 'The message id of a finished debugger turn.'),
      ),
    },
    [`${base}/chat-messages/{task_id}/events`]: {
      get: op(
        {
          operationId: 'streamDebugChatMessageEvents',
          summary:
            "Re-attach to a debugger turn's event stream: every event after `Last-Event-ID` (header) or `last_event_id` (query), " +
            'each exactly once, then the live ones.' +
            NOT_YOURS,
          responses: { '200': sse, ...errors() },
        },
        taskId,
        { name: 'last_event_id', in: 'query', required: false, schema: { type: 'string' } },
        { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string' } },
      ),
    },
    [`${base}/chat-messages/{task_id}/stop`]: {
      post: op(
        {
          operationId: 'stopDebugChatMessage',
          summary:
            'Stop a debugger turn (workflow cancellation; the partial answer is kept; a waiting form is cancelled). Idempotent.' +
            NOT_YOURS,
          responses: { '200': { description: 'Stop requested.', content: json(ref('SuccessResponse')) }, ...errors() },
        },
        taskId,
      ),
    },
    [`${base}/forms/{form_token}`]: {
      get: op(
        {
          operationId: 'getDebugHumanInputForm',
          summary: "Read a debugger turn's ask_human form to render it." + NOT_YOURS,
          responses: { '200': { description: 'The form.', content: json(ref('HumanInputFormResponse')) }, ...errors() },
        },
        formToken,
      ),
      post: op(
        {
          operationId: 'submitDebugHumanInputForm',
          summary:
            'Submit a debugger turn’s ask_human form: the turn resumes as a new message on the same draft (a build-draft turn on its ' +
            'build draft, with its session snapshot and the answer as the deferred tool result); follow it with the events route.' +
            NOT_YOURS,
          requestBody: { required: true, content: json(ref('DebugFormSubmitRequest')) },
          responses: {
            '200': { description: 'Submitted.', content: json(ref('HumanInputSubmitResponse')) },
            ...errors(412),
          },
        },
        formToken,
      ),
    },
  };
}
