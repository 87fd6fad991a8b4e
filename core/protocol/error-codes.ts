/**
 * Every error code this project answers, in one place (issue 32 item 5): the `code` of an HTTP error body
 * `{code, message, status}`, of a turn's `error` event, and of an agent run's failure (`error_type`/`reason`).
 * `HttpError`, `CodedError`, `turnFailure`, `KnowledgeError` and the backend's errors take an `ErrorCode`, so an unknown string
 * does not typecheck. docs/PROTOCOL.md's error tables (`npm run docs:errors`) and the OpenAPI error `code` enum are
 * generated from this list; test/unit/error-codes.test.ts fails when they, or the code, drift from it.
 *
 * A plain const without imports: the agent backend shares it as part of core's protocol.
 */

/**
 * Who sees a code: `service` the /v1 API (Dify's), `console` /console/api, `inner` the api's inner API (the agent
 * backend's callers: LLM gateway, tools, knowledge, agent config), `backend` the agent backend's own HTTP API,
 * `event` a turn's `error` event (and a blocking turn's HTTP error), `run` a backend run's `error_type`/`reason`.
 */
export type ErrorAudience = 'service' | 'console' | 'inner' | 'backend' | 'event' | 'run';

export interface ErrorCodeInfo {
  /** The HTTP status(es) answered with it (for a run reason: the status of the turn error it becomes). */
  readonly status: readonly number[];
  readonly audience: readonly ErrorAudience[];
  /** One line: what happened (and what to do). */
  readonly meaning: string;
}

const SC: ErrorAudience[] = ['service', 'console'];

export const ERROR_CODES = {
  // --- Request shape and transport (every HTTP surface) ---
  invalid_param: {
    status: [400],
    audience: SC,
    meaning:
      'A field failed validation, the message naming it: also a JSON body nested deeper than `JSON_MAX_DEPTH` or holding NUL or a lone UTF-16 surrogate (refused, not normalised), a malformed `Last-Event-ID`, `page`/`limit` out of range',
  },
  invalid_json: { status: [400], audience: SC, meaning: 'The request body is not valid JSON' },
  bad_request: {
    status: [400],
    audience: SC,
    meaning: "Another body-parser 4xx, or a malformed request answered by the HTTP server itself (with Node's status)",
  },
  request_timeout: {
    status: [408],
    audience: SC,
    meaning: 'Headers or body slower than `HTTP_HEADERS_TIMEOUT_MS` / `HTTP_REQUEST_TIMEOUT_MS` (answered by the HTTP server)',
  },
  request_entity_too_large: { status: [413], audience: SC, meaning: 'The request body is over the size limit' },
  request_header_fields_too_large: { status: [431], audience: SC, meaning: "The headers, URL included, over Node's limit" },
  request_aborted: { status: [400], audience: SC, meaning: 'The client went away before its upload arrived' },
  invalid_multipart: {
    status: [400],
    audience: SC,
    meaning: 'A multipart body that cannot be read (also one that ends before its closing boundary: a truncated upload)',
  },
  not_found: {
    status: [404],
    audience: ['service', 'console', 'backend'],
    meaning: "No route for this method and path; a task or conversation that is not this user's",
  },
  unauthorized: {
    status: [401],
    audience: ['service', 'console', 'inner', 'backend'],
    meaning: 'Missing, unknown or revoked key or token',
  },
  api_key_revoked: {
    status: [401],
    audience: ['service', 'event'],
    meaning:
      "The app API key a stream or a blocking request was opened with was revoked meanwhile: the stream's last `error` event (the turn itself goes on unless the revoke stopped it)",
  },
  forbidden: { status: [403], audience: ['service', 'backend'], meaning: 'A signed file URL whose signature is missing, wrong or expired' },
  too_many_requests: { status: [429], audience: SC, meaning: 'The per-key or per-IP rate limit was reached; retry later' },
  service_unavailable: {
    status: [503],
    audience: ['service', 'console', 'inner', 'backend'],
    meaning: 'PostgreSQL or Temporal is unreachable (with `Retry-After`; nothing written)',
  },
  server_busy: {
    status: [503],
    audience: SC,
    meaning:
      'A new turn while the deployment has `MAX_TURNS_IN_FLIGHT` turns pending or running (with `Retry-After`; refused before anything is written, `api/turns/admission.ts`)',
  },
  internal_server_error: {
    status: [500],
    audience: ['service', 'console', 'event'],
    meaning: 'Anything unexpected (after the activity retries, for a turn)',
  },

  // --- Service API (/v1) ---
  app_unavailable: { status: [400], audience: ['service'], meaning: 'The app has no agent or no valid active config' },
  app_not_found: { status: [404], audience: ['service', 'console'], meaning: "No such app in the caller's tenant" },
  conversation_not_exists: { status: [404], audience: SC, meaning: 'No such conversation for this app and user' },
  last_conversation_not_exists: {
    status: [404],
    audience: SC,
    meaning: '`last_id` of a conversation page is not one of this user’s conversations',
  },
  first_message_not_exists: { status: [404], audience: ['service'], meaning: '`first_id` of a message page is not in this thread' },
  message_not_exists: {
    status: [404],
    audience: SC,
    meaning: 'No such message in this conversation (`branch_id`, feedback, fork point)',
  },
  parent_message_not_exists: {
    status: [404],
    audience: ['service'],
    meaning: '`parent_message_id` is not a message of this conversation (or any parent on a new conversation)',
  },
  parent_message_not_finished: { status: [409], audience: ['service'], meaning: 'The parent of a branch has not finished its turn yet' },
  message_not_finished: {
    status: [409],
    audience: SC,
    meaning: 'The fork point, or the message whose follow-up questions are asked for, has not finished its turn yet',
  },
  app_suggested_questions_after_answer_disabled: {
    status: [403],
    audience: SC,
    meaning:
      "GET /v1/messages/{id}/suggested while the agent's active config has `features.suggested_questions_after_answer` off (the debugger's twin: the draft the turn ran on; Dify's code and status)",
  },
  session_snapshot_pruned: {
    status: [409],
    audience: SC,
    meaning: 'The session snapshot a branch or fork needs was pruned (`SESSION_SNAPSHOTS_PER_BRANCH`; extra `message_id`)',
  },
  session_snapshot_unavailable: {
    status: [409],
    audience: SC,
    meaning: 'The branch or fork point is older than per-message snapshots (extra `message_id`)',
  },
  fork_point_waiting_for_human: {
    status: [409],
    audience: SC,
    meaning: 'The fork point is a turn still waiting for a human answer',
  },
  conversation_busy: { status: [409], audience: SC, meaning: 'A turn is in flight in this conversation (extra `task_id`)' },
  conversation_waiting_for_human: {
    status: [409],
    audience: SC,
    meaning: 'The conversation waits for an answer to a human-input form (extra `form_token`)',
  },
  conversation_queue_full: {
    status: [429],
    audience: SC,
    meaning:
      'Multitask `enqueue`/`interrupt`/`rollback` on a conversation whose queue holds `CONVERSATION_QUEUE_LIMIT` messages (extra `limit`, `task_id`)',
  },
  file_not_found: { status: [404], audience: SC, meaning: 'No such upload (or not visible to this user)' },
  file_too_large: { status: [413], audience: SC, meaning: 'An upload over its size limit' },
  unsupported_file_type: { status: [415], audience: SC, meaning: 'An upload whose type is not accepted' },
  no_file_uploaded: { status: [400], audience: SC, meaning: 'A multipart upload without a `file` part' },
  too_many_files: { status: [400], audience: SC, meaning: 'More than one file in an upload' },
  invalid_remote_url: {
    status: [400],
    audience: SC,
    meaning: 'A `remote_url` file refused: not http(s), a private or reserved address, or unreachable (the message says why)',
  },
  workspace_quota_exceeded: {
    status: [413],
    audience: SC,
    meaning:
      "A fork's copy of the workspace would hold more than `WORKSPACE_QUOTA_BYTES`, or the tenant's workspace copies more than `TENANT_MAX_WORKSPACE_COPY_BYTES` (nothing is copied or kept)",
  },
  storage_quota_exceeded: {
    status: [413],
    audience: SC,
    meaning:
      "The tenant's stored documents past `TENANT_MAX_DOCUMENT_BYTES`, or its uploads past `TENANT_MAX_UPLOAD_BYTES` (nothing is stored)",
  },
  storage_unavailable: { status: [503], audience: SC, meaning: 'An upload could not be stored' },
  human_input_form_not_found: { status: [404], audience: SC, meaning: 'No such human-input form token' },
  human_input_form_submitted: { status: [412], audience: SC, meaning: 'The form was already answered' },
  human_input_form_expired: { status: [412], audience: SC, meaning: 'The form expired before it was answered' },
  human_input_form_cancelled: { status: [412], audience: SC, meaning: 'The form was cancelled (its turn stopped)' },

  // --- Console API (/console/api) ---
  agent_draft_not_found: {
    status: [404],
    audience: ['console', 'inner', 'event'],
    meaning: 'The agent has no draft (a debugger turn without its draft)',
  },
  agent_build_draft_not_found: { status: [404], audience: ['console', 'event'], meaning: 'The account has no build draft for this agent' },
  agent_draft_conflict: { status: [409], audience: ['console'], meaning: 'The shared draft changed since the build draft was based on it' },
  agent_version_not_found: { status: [404], audience: ['console'], meaning: 'No such version of this agent' },
  invalid_agent_config: {
    status: [400],
    audience: ['console'],
    meaning: 'A config that cannot run, at save or publish: the message names the field, extra `issues` lists every `{path, message}`',
  },
  app_name_taken: { status: [409], audience: ['console'], meaning: 'Another app of the tenant has this name' },
  app_busy: {
    status: [409],
    audience: ['console'],
    meaning: 'The app cannot be deleted while turns of it are running, queued or waiting for a human (extra `task_ids`): stop them first',
  },
  api_key_not_found: { status: [404], audience: ['console'], meaning: 'No such API key for this app' },
  message_not_found: { status: [404], audience: ['console'], meaning: 'No such message of this app (logs, inspector)' },
  schedule_not_found: { status: [404], audience: ['console'], meaning: 'No such schedule of this app' },
  invalid_schedule: {
    status: [400],
    audience: ['console'],
    meaning:
      'The schedule’s spec cannot run: a cron’s field, value and what it may be are named (checked before Temporal), or Temporal refused it',
  },
  schedule_interval_too_short: {
    status: [400],
    audience: ['console'],
    meaning:
      'The schedule would run more often than `SCHEDULE_MIN_INTERVAL_SECONDS` (its `interval_seconds`, or the two closest times of its cron, seconds fields and `@every` included)',
  },
  schedule_quota_exceeded: {
    status: [403],
    audience: ['console'],
    meaning: 'The app holds `SCHEDULES_PER_APP` schedules, or the tenant `SCHEDULES_PER_TENANT`: delete one first',
  },
  webhook_quota_exceeded: {
    status: [403],
    audience: ['console'],
    meaning: 'The app holds `WEBHOOKS_PER_APP` webhooks, or the tenant `WEBHOOKS_PER_TENANT`: delete one first',
  },
  webhook_not_found: { status: [404], audience: ['console'], meaning: 'No such webhook of this app' },
  invalid_webhook_url: {
    status: [400],
    audience: ['console'],
    meaning:
      'A webhook URL refused when saved: `user:password@`, or a host that does not resolve or resolves to a loopback, private, link-local/metadata or otherwise non-public address (unless `WEBHOOK_ALLOW_PRIVATE_NETWORK`)',
  },
  webhook_delivery_not_found: { status: [404], audience: ['console'], meaning: 'No such delivery of this webhook' },
  dataset_not_found: { status: [404], audience: ['console'], meaning: "No such dataset in the tenant's knowledge" },
  document_not_found: { status: [404], audience: ['console'], meaning: 'No such document in this dataset' },
  segment_not_found: { status: [404], audience: ['console'], meaning: 'No such segment in this document' },
  dataset_quota_exceeded: { status: [403], audience: ['console'], meaning: 'The tenant has `TENANT_MAX_DATASETS` datasets' },
  document_quota_exceeded: { status: [403], audience: ['console'], meaning: 'The tenant has `TENANT_MAX_DOCUMENTS` documents' },
  document_too_large: { status: [413], audience: ['console'], meaning: 'A document over its size limit' },
  document_unreadable: {
    status: [400],
    audience: ['console'],
    meaning: 'A document that cannot be parsed (also a parser limit: pages, decoded text, time, memory)',
  },
  document_empty: { status: [422], audience: ['console'], meaning: 'The document has no text to index' },
  unsupported_document_type: { status: [415], audience: ['console'], meaning: 'A document type the indexer does not read' },
  embedding_unavailable: {
    status: [400],
    audience: ['console'],
    meaning: 'The dataset’s embedding model cannot be used (no credentials, unknown model)',
  },
  embedding_failed: { status: [502], audience: ['console'], meaning: 'The embedding provider failed on a document' },
  tool_provider_not_found: { status: [404], audience: ['console', 'inner'], meaning: 'No such tool provider in the tenant' },
  tool_provider_exists: { status: [409], audience: ['console'], meaning: 'A tool provider with this name already exists' },
  tool_provider_in_use: { status: [409], audience: ['console'], meaning: "Agents' configs still use this tool provider's tools" },
  invalid_openapi: {
    status: [400],
    audience: ['console'],
    meaning:
      'A tool provider’s OpenAPI document cannot be used (also nested deeper than `JSON_MAX_DEPTH`, or 128 once `$ref`s are inlined)',
  },
  invalid_server_url: { status: [400], audience: ['console'], meaning: 'An MCP `server_url` refused (scheme, private address)' },
  mcp_server_unreachable: { status: [400], audience: ['console'], meaning: 'The MCP server did not list its tools' },
  mcp_no_tools: { status: [400], audience: ['console'], meaning: 'The MCP server lists no tools that can be offered' },
  refresh_not_supported: { status: [400], audience: ['console'], meaning: 'Only an MCP tool provider lists its tools again' },
  model_provider_not_found: { status: [404], audience: ['console'], meaning: 'No such model provider' },
  model_credentials_not_found: { status: [404], audience: ['console'], meaning: 'The workspace has no credentials for this provider' },
  provider_credentials_invalid: { status: [400], audience: ['console'], meaning: "The provider refused the credentials' test call" },
  invalid_base_url: {
    status: [400],
    audience: ['console'],
    meaning:
      "A model provider's `base_url` refused when saved (with or without `validate`): not http(s), `user:password@`, or a host that does not resolve or resolves to a loopback, private, link-local/metadata or otherwise non-public address (unless `MODEL_ALLOW_PRIVATE_NETWORK`)",
  },

  // --- Inner API (the agent backend calling the api) ---
  execution_context_required: {
    status: [401, 403],
    audience: ['inner'],
    meaning: "The run's signed execution context is missing (401 on agent config's header, 403 in an LLM request body)",
  },
  invalid_execution_context: {
    status: [400, 403],
    audience: ['inner'],
    meaning: 'The execution context cannot be parsed (400) or its signature is wrong (403)',
  },
  execution_context_expired: { status: [403], audience: ['inner'], meaning: 'The execution context has expired' },
  execution_context_ended: { status: [403], audience: ['inner'], meaning: 'The run the execution context belongs to is not in progress' },
  agent_scope_mismatch: { status: [403], audience: ['inner'], meaning: 'The execution context belongs to another agent' },
  caller_scope_mismatch: { status: [403], audience: ['inner'], meaning: "An LLM request's caller is not the context's run" },
  agent_config_not_found: { status: [404], audience: ['inner'], meaning: 'No configuration for this run' },
  agent_config_write_forbidden: { status: [403], audience: ['inner'], meaning: 'Only an account may edit its own build draft' },
  dataset_not_allowed: { status: [403], audience: ['inner'], meaning: "A knowledge search names a dataset outside the run's config" },
  tool_not_in_config: { status: [403], audience: ['inner'], meaning: "A tool call names a tool outside the run's config" },
  workspace_not_authorized: {
    status: [403],
    audience: ['inner', 'run', 'event'],
    meaning: "The runtime layer's workspace is not authorized for this run (a run's `error_type`; its turn fails 403)",
  },
  agent_llm_quota_exceeded: {
    status: [429, 400],
    audience: ['inner', 'run'],
    meaning: "The tenant's model credits are used up (429 from the gateway; a run reason, its turn fails `provider_quota_exceeded`)",
  },

  // --- The agent backend's own HTTP API (docs/PROTOCOL.md §2) ---
  invalid_request: {
    status: [400, 413, 502],
    audience: ['inner', 'backend', 'event'],
    meaning:
      "A request that fails its schema (backend POST /runs; the LLM gateway: also an unknown provider or model, 413 a body too large); passed on as a turn's error with the backend's status, 502 for its other 4xx",
  },
  invalid_layer_order: {
    status: [400],
    audience: ['backend', 'event'],
    meaning: 'Resource layers out of Runtime → Shell → Config order in the composition',
  },
  unknown_module: {
    status: [400],
    audience: ['backend', 'event'],
    meaning: 'A composition layer names a module type the backend does not have',
  },
  module_unavailable: {
    status: [400],
    audience: ['backend', 'event'],
    meaning: 'A composition layer names a module that is registered but unavailable here',
  },
  session_snapshot_mismatch: {
    status: [422],
    audience: ['backend', 'event'],
    meaning: "The session snapshot's layers differ from the composition's: start a new session",
  },
  invalid_session_snapshot: {
    status: [422],
    audience: ['backend', 'event'],
    meaning: "A layer's runtime state in the session snapshot fails its module's schema",
  },
  agent_run_refused: {
    status: [400, 409, 413, 422, 502],
    audience: ['event'],
    meaning: 'The backend refused the run with a 4xx and no code of its own (its status for a verdict on the request, else 502)',
  },
  run_not_found: { status: [404], audience: ['backend'], meaning: 'No such run (or it expired)' },
  run_already_ended: { status: [409], audience: ['backend'], meaning: 'Deferred tool results or a cancel for a run that already ended' },
  backend_busy: { status: [503], audience: ['backend'], meaning: 'The backend is at `MAX_CONCURRENT_RUNS`; retry shortly' },
  payload_too_large: { status: [413], audience: ['backend'], meaning: 'The request body is over the backend’s limit' },
  upstream_unavailable: { status: [502], audience: ['backend'], meaning: "The stub's agent configuration service is unreachable" },
  internal_error: {
    status: [500],
    audience: ['inner', 'backend', 'run'],
    meaning: 'Anything unexpected in the backend or the LLM gateway (a run reason: its turn fails `completion_request_error`)',
  },

  // --- A turn's error event (the client's `error`; docs/seeds/001) ---
  agent_not_found: { status: [404], audience: ['inner', 'event'], meaning: 'The app has no agent' },
  agent_not_published: { status: [400], audience: ['event'], meaning: 'The agent has no published configuration yet' },
  agent_config_invalid: {
    status: [400],
    audience: ['event'],
    meaning:
      'A stored config that cannot run (the schema, datasets and tool providers of the tenant, checked before the backend is called), the message naming each field',
  },
  tool_not_found: { status: [400], audience: ['event'], meaning: 'The config names tools that no longer exist' },
  agent_session_configuration_changed: {
    status: [409],
    audience: ['event'],
    meaning: "The retained snapshot's layer names differ from the composition: start a new conversation",
  },
  agent_binding_generation_mismatch: {
    status: [409],
    audience: ['event'],
    meaning: "The conversation's binding belongs to another config version, kind or home snapshot",
  },
  temporal_unavailable: {
    status: [503],
    audience: ['event'],
    meaning: 'The turn’s workflow could not be started (Temporal unreachable): recorded failed, its conversation freed',
  },
  agent_run_limit_exceeded: {
    status: [400],
    audience: ['run', 'event'],
    meaning: 'The run used its model-request or tool-call budget (a run `error_type`)',
  },
  agent_run_timeout: {
    status: [504],
    audience: ['event'],
    meaning: "The run passed the backend's wall-clock budget (reason `run_timeout`)",
  },
  rate_limit_error: {
    status: [429],
    audience: ['event'],
    meaning: 'The provider rate-limited the model call (reason `InvokeRateLimitError`)',
  },
  completion_request_error: {
    status: [400],
    audience: ['event', 'service'],
    meaning:
      'The model call or run failed otherwise (the other `Invoke*Error` reasons and any unknown one; with reason `binding_lost`: "The retained agent working environment is no longer available."); for suggested questions, the gateway refused the model (no credentials, unknown model)',
  },
  provider_quota_exceeded: {
    status: [400],
    audience: ['event', 'service'],
    meaning: "The tenant's model credits are used up (reason `agent_llm_quota_exceeded`; also a suggested-questions request)",
  },
  provider_auth_failed: {
    status: [400],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider refused the credentials (the gateway's error chunk `data.code`, passed on as the run's reason)",
  },
  provider_rate_limited: {
    status: [429],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider kept answering 429 after the gateway's retries",
  },
  context_window_exceeded: {
    status: [400],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider found the conversation longer than the model's context window",
  },
  content_filtered: {
    status: [400],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider's content filter refused the prompt or answer",
  },
  provider_timeout: {
    status: [504],
    audience: ['inner', 'run', 'event'],
    meaning:
      'The provider sent nothing within the first-token timeout, or stalled past the idle timeout (docs/models.md "Stream timeouts"); retried while nothing was streamed; the partial answer and estimated usage are kept',
  },
  provider_overloaded: {
    status: [503],
    audience: ['inner', 'run', 'event'],
    meaning:
      "The provider is overloaded or unavailable (Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`, Bedrock `ServiceUnavailableException`) after the gateway's retries",
  },
  provider_billing_error: {
    status: [400],
    audience: ['inner', 'run', 'event'],
    meaning:
      "The provider account behind the credentials has no quota or credit left (OpenAI 429 `insufficient_quota`, Anthropic's credit balance); not retried",
  },
  provider_model_not_found: {
    status: [400],
    audience: ['inner', 'run', 'event'],
    meaning:
      'The provider has no such model, or these credentials may not use it (OpenAI `model_not_found`, Anthropic `not_found_error`, Ollama "not found, try pulling it first")',
  },
  provider_unreachable: {
    status: [502],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider's host could not be reached (connection refused, DNS, TLS): nothing was sent or answered",
  },
  provider_stream_interrupted: {
    status: [502],
    audience: ['inner', 'run', 'event'],
    meaning: "The provider's answer started and its connection broke (or the stream ended) before the answer was complete",
  },

  // --- A run's failure reason (`run_failed.reason`, docs/PROTOCOL.md §2) ---
  run_timeout: {
    status: [504],
    audience: ['run'],
    meaning: "The run passed the backend's wall-clock budget (the turn's `agent_run_timeout`)",
  },
  backend_restarted: {
    status: [400],
    audience: ['run'],
    meaning: 'The backend process that owned the run stopped heartbeating (the turn is retried or fails `completion_request_error`)',
  },
  layer_exit_failed: { status: [400], audience: ['run'], meaning: "A layer's exit (its snapshot) failed" },
  binding_lost: {
    status: [400],
    audience: ['run'],
    meaning:
      "The runtime layer's workspace is missing or foreign (seed 001): the api retires the binding, the next turn starts a fresh one",
  },
  workspace_authorization_unavailable: {
    status: [400],
    audience: ['run'],
    meaning: "The runtime layer could not ask the api's inner endpoint to authorize its workspace (unreachable after retries)",
  },
  event_store_unavailable: {
    status: [400],
    audience: ['run'],
    meaning: 'An event could not be stored (PostgreSQL away past the run’s deadline)',
  },
  event_store_error: { status: [400], audience: ['run'], meaning: 'An event could not be stored (a non-transient store error)' },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Every code, in registry order (the OpenAPI enum). */
export const ERROR_CODE_LIST = Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** The codes answered with one HTTP status only: a `CodedError` of one needs no status of its own. */
export type SingleStatusCode = {
  [K in ErrorCode]: (typeof ERROR_CODES)[K]['status'] extends readonly [number] ? K : never;
}[ErrorCode];

/**
 * A refusal with a registry code, thrown below the api (core/domain/) where no HTTP is known: its status is the
 * code's own, so the code and the status cannot disagree. The api's error handler renders it as `{code, message,
 * status, ...extra}`, as it does `HttpError` (which takes its status by hand and retires over time).
 */
export class CodedError extends Error {
  readonly status: number;

  constructor(
    readonly code: SingleStatusCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CodedError';
    this.status = ERROR_CODES[code].status[0];
  }
}
