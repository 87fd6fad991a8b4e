/** Request schemas of the public service API (docs/PROTOCOL.md §1, Dify's field names). */
import { z } from 'zod';
import { SKIP_REASONS } from '../core/domain/workspace-tree.js';
import { HumanInputFormView } from '../core/protocol/client-events.js';
import { RetrieverResource } from '../core/protocol/retriever-resource.js';
import { ERROR_CODE_LIST } from '../core/protocol/error-codes.js';
import { MULTITASK_STRATEGIES } from '../core/protocol/workflow-contract.js';

export const Uuid = z.string().uuid();
/** PostgreSQL text and jsonb cannot hold NUL; refusing it here keeps such input a 400, not a 500. */
const noNul = (s: string) => !s.includes('\u0000');
const NUL_MESSAGE = 'must not contain NUL characters';
/** A message must say something: whitespace alone is refused (the model would answer an empty prompt). */
export const Query = z
  .string()
  .min(1, 'is required')
  .max(100_000)
  .refine((s) => s.trim().length > 0, 'must not be blank')
  .refine(noNul, NUL_MESSAGE);
export const UserId = z.string().trim().min(1, 'is required').max(255).refine(noNul, NUL_MESSAGE);
/** `inputs`: a JSON object whose strings (keys and values, at any depth) hold no NUL. */
const Inputs = z.record(z.string(), z.unknown()).refine((v) => noNul(JSON.stringify(v)), NUL_MESSAGE);

export const ChatFile = z.object({
  type: z.enum(['image', 'document', 'audio', 'video', 'custom']),
  transfer_method: z.enum(['local_file', 'remote_url']),
  upload_file_id: z.string().optional(),
  url: z.string().url().optional(),
});

export const ChatRequest = z.object({
  inputs: Inputs.default({}),
  query: Query,
  user: UserId,
  response_mode: z.enum(['streaming', 'blocking']).default('streaming'),
  // Dify's SDKs send `null` for "none" (dify-client posts `files: null`).
  conversation_id: z.union([Uuid, z.literal('')]).nullish(),
  files: z.array(ChatFile).max(20).nullable().default([]),
  auto_generate_name: z.boolean().default(true),
  /** The message this one follows in its thread (Dify). Absent/null/'': the newest message. Another message of the
   * conversation: a branch from there (a regenerate, with the query answered under it); UUID_NIL: a new root. */
  parent_message_id: z.union([Uuid, z.literal('')]).nullish(),
  /** Extension (LangGraph's name): what this message does when a turn of the conversation is in flight — `reject`
   * (409 conversation_busy, Dify's behaviour), `enqueue`, `interrupt`, `rollback`. Absent/null: the app's default. */
  multitask_strategy: z.enum(MULTITASK_STRATEGIES).nullish(),
});
export type ChatRequest = z.output<typeof ChatRequest>;

/** Console: the app's default multitask strategy (chat requests naming none). */
export const MultitaskSettings = z.object({ default_strategy: z.enum(MULTITASK_STRATEGIES) }).strict();

export const StopRequest = z.object({ user: UserId });

export const MessagesQuery = z.object({
  conversation_id: Uuid,
  user: UserId,
  first_id: z.union([Uuid, z.literal('')]).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  /** Extension: show the branch through this message (ending at its newest descendant), not the newest branch. */
  branch_id: z.union([Uuid, z.literal('')]).optional(),
});

export const ConversationsQuery = z.object({
  user: UserId,
  last_id: z.union([Uuid, z.literal('')]).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  sort_by: z.enum(['created_at', '-created_at', 'updated_at', '-updated_at']).default('-updated_at'),
});

export const RenameConversationRequest = z.object({
  name: z.string().trim().max(255).refine(noNul, NUL_MESSAGE).nullish(),
  /** Name the conversation from its first query instead of `name`. */
  auto_generate: z.boolean().nullish().default(false),
  user: UserId,
});

/** Extension (issue 35): fork a conversation at one of its messages. */
export const ForkConversationRequest = z.object({ user: UserId, message_id: Uuid });

/** DELETE carries `{user}` in its JSON body (Dify); `?user=` is accepted too. */
export const DeleteConversationRequest = z.object({ user: UserId });

export const FeedbackRequest = z.object({
  /** `null` removes this user's feedback. */
  rating: z.enum(['like', 'dislike']).nullable(),
  user: UserId,
  content: z.string().max(10_000).refine(noNul, NUL_MESSAGE).nullish(),
});

export const UserQuery = z.object({ user: UserId.optional() });

export const FilePreviewQuery = z.object({
  user: UserId,
  as_attachment: z.enum(['true', 'false']).default('false'),
});

/** The multipart form of POST /v1/files/upload (documentation only: parsed by busboy). */
export const FileUploadForm = z.object({
  file: z.string().meta({
    contentMediaType: 'application/octet-stream',
    description: 'The file (images: png, jpg, jpeg, webp, gif ≤ 10 MB; documents: pdf, txt, md, csv, json, docx ≤ 15 MB).',
  }),
  user: UserId,
});

// ---- responses -------------------------------------------------------------------------------

/** `code` is one of the registry's (core/protocol/error-codes.ts): the OpenAPI enum is generated from it. */
export const ErrorResponse = z.object({ code: z.enum(ERROR_CODE_LIST), message: z.string(), status: z.number().int() });

export const SuccessResponse = z.object({ result: z.literal('success') });

/** GET /v1/messages/{message_id}/suggested (Dify's): the questions the user may ask after this answer. */
export const SuggestedQuestionsResponse = z.object({
  result: z.literal('success'),
  data: z.array(z.string()).max(3).describe('Up to three questions, in order (none when the model answered none).'),
});

export const ConversationResponse = z.object({
  id: Uuid,
  name: z.string(),
  inputs: z.record(z.string(), z.unknown()),
  status: z.string(),
  introduction: z.string(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

/** What a fork's copy of the workspace took and left out (api/service/fork.ts; PROTOCOL §1). */
export const WorkspaceCopyResponse = z
  .object({
    bytes: z
      .number()
      .int()
      .describe('What the copy counts against the quotas: each entry in whole 4 KiB blocks, at least one block an entry.'),
    entries: z.number().int().describe('Directories, files and links copied.'),
    skipped: z
      .array(
        z.object({
          path: z.string().describe('Relative to the workspace.'),
          reason: z
            .enum(SKIP_REASONS)
            .describe(
              '`fifo`, `socket`, `device`: special files are never copied; `hard_link`: a link to a file outside the workspace; `not_readable`: the workspace’s own user could not read it; `other_filesystem`; `too_deep` (more than 256 levels); `changed_during_copy`: replaced while the copy reached it (a process still running in the workspace).',
            ),
        }),
      )
      .describe('The first 100 entries left out.'),
    skipped_total: z.number().int().describe('How many entries were left out in all.'),
  })
  .describe('Extension: the copy of the source workspace; null when the source had no workspace.');

export const ForkConversationResponse = ConversationResponse.extend({ workspace_copy: WorkspaceCopyResponse.nullable() });

export const ConversationListResponse = z.object({
  limit: z.number().int(),
  has_more: z.boolean(),
  data: z.array(
    ConversationResponse.extend({
      active_turn: z
        .object({
          message_id: Uuid.describe('Its task id: GET /v1/chat-messages/{task_id}/events re-attaches to it.'),
          status: z.enum(['pending', 'running', 'paused', 'queued']).describe('paused: waiting for the answer to its ask_human form.'),
        })
        .nullable()
        .describe('Extension (issue 42): the turn in flight (running, or waiting for its form); null when none.'),
    }),
  ),
});

export const MessageFileResponse = z.object({
  id: Uuid,
  type: z.string(),
  url: z.string().nullable(),
  belongs_to: z.string(),
  /** Dify's: how the file came (local_file, remote_url; tool_file for the agent's outputs). */
  transfer_method: z.string(),
  /** Dify's: the upload behind the file (null for a remote_url file): a client sends it again (regenerate) as `files[].upload_file_id`. */
  upload_file_id: Uuid.nullable(),
  /** Dify's: the file's name (its upload's; a remote_url file's, from its URL), MIME type and size in bytes; null when unknown. */
  filename: z.string().nullable(),
  mime_type: z.string().nullable(),
  size: z.number().int().nullable(),
});

export const AgentThoughtResponse = z.object({
  id: Uuid,
  message_id: Uuid,
  position: z.number().int(),
  thought: z.string(),
  tool: z.string(),
  tool_labels: z.unknown(),
  tool_input: z.string(),
  observation: z.string(),
  message_files: z.unknown(),
  created_at: z.number().int(),
});

export const MessageResponse = z.object({
  id: Uuid,
  conversation_id: Uuid,
  /** The message it follows in its thread; null for a thread's first message. */
  parent_message_id: Uuid.nullable(),
  /** Extension: the messages under the same parent, oldest first, itself included (regenerated answers: the arrows). */
  sibling_ids: z.array(Uuid),
  inputs: z.unknown(),
  query: z.string(),
  answer: z.string(),
  status: z.enum(['normal', 'error']),
  turn_status: z.enum(['pending', 'running', 'paused', 'succeeded', 'failed', 'stopped', 'queued']),
  /** Extension: a queued message's place in its conversation's line (1: it runs next); null for any other. */
  queue_position: z.number().int().min(1).nullable(),
  /** Extension: set on an ask_human continuation, naming the paused message whose query it carries. */
  resumed_from_message_id: Uuid.nullable(),
  error: z.string().nullable(),
  /** Extension: a failed agent run as the backend reported it (raw error_type, reason, its run id). */
  agent_failure: z
    .object({ error_type: z.string().nullable(), reason: z.string().nullable(), error: z.string(), backend_run_id: z.string().nullable() })
    .nullable(),
  message_files: z.array(MessageFileResponse),
  feedback: z.object({ rating: z.string() }).nullable(),
  /** Dify's citation and attribution list: filled when the app's retriever_resource feature was on for the turn. */
  retriever_resources: z.array(RetrieverResource),
  agent_thoughts: z.array(AgentThoughtResponse),
  metadata: z.object({ usage: z.unknown() }),
  created_at: z.number().int(),
});

export const MessageListResponse = z.object({
  limit: z.number().int(),
  has_more: z.boolean(),
  data: z.array(MessageResponse),
});

export const ChatBlockingResponse = z.object({
  event: z.literal('message'),
  task_id: Uuid,
  id: Uuid,
  message_id: Uuid,
  conversation_id: Uuid,
  mode: z.literal('agent'),
  answer: z.string(),
  metadata: z.unknown(),
  created_at: z.number().int(),
});

export const UploadFileResponse = z.object({
  id: Uuid,
  name: z.string(),
  size: z.number().int(),
  extension: z.string(),
  mime_type: z.string(),
  created_by: Uuid,
  created_at: z.number().int(),
});

const Enabled = z.object({ enabled: z.boolean() });
export const ParametersResponse = z.object({
  opening_statement: z.string(),
  suggested_questions: z.array(z.string()),
  suggested_questions_after_answer: Enabled,
  speech_to_text: Enabled,
  text_to_speech: Enabled,
  retriever_resource: Enabled,
  annotation_reply: Enabled,
  more_like_this: Enabled,
  sensitive_word_avoidance: Enabled,
  user_input_form: z.array(z.unknown()),
  file_upload: z.object({
    enabled: z.boolean(),
    allowed_file_types: z.array(z.string()),
    allowed_file_extensions: z.array(z.string()),
    allowed_file_upload_methods: z.array(z.enum(['local_file', 'remote_url'])),
    number_limits: z.number().int(),
    image: z.object({
      enabled: z.boolean(),
      number_limits: z.number().int(),
      detail: z.string(),
      transfer_methods: z.array(z.enum(['local_file', 'remote_url'])),
    }),
  }),
  /** Size limits in MB (0: that kind of file is not accepted). */
  system_parameters: z.object({
    file_size_limit: z.number(),
    image_file_size_limit: z.number(),
    audio_file_size_limit: z.number(),
    video_file_size_limit: z.number(),
    workflow_file_upload_limit: z.number(),
  }),
  /** Extension: the app's default multitask strategy (console multitask-settings), what a chat request naming none does while a turn runs. */
  multitask_strategy: z
    .enum(MULTITASK_STRATEGIES)
    .describe(
      "Extension: the app's default `multitask_strategy` (console `multitask-settings`): what a chat message that names none does while a turn of its conversation runs.",
    ),
});

export const AppInfoResponse = z.object({
  name: z.string(),
  description: z.string(),
  tags: z.array(z.string()),
  mode: z.literal('agent'),
});

// ---- ask_human forms (routes in api/service/forms.ts; these document them) -----------------------

export const HumanInputSubmitRequest = z.object({
  /** Field name → value. */
  inputs: z.record(z.string(), z.unknown()).default({}),
  /** The id of one of the form's actions. */
  action: z.string().min(1).max(64),
  user: UserId,
});

export const HumanInputFormResponse = HumanInputFormView.extend({
  urgency: z.string(),
  status: z.enum(['waiting', 'submitted', 'expired', 'cancelled']),
  conversation_id: Uuid,
  message_id: Uuid,
  resume_message_id: Uuid.nullable(),
});

export const HumanInputSubmitResponse = z.object({
  result: z.literal('success'),
  /** The continuation message: re-attach with GET /v1/chat-messages/{task_id}/events. */
  task_id: Uuid,
  message_id: Uuid,
  conversation_id: Uuid,
});
