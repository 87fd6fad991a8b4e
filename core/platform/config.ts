/**
 * The one typed configuration module. Every process reads its environment here, once, at start-up;
 * no other module touches process.env. docs/configuration.md's tables are generated from this schema (`npm run
 * docs:config`): a property's JSDoc is its row's meaning, a property without one shares the row above it, and a
 * `// --- Title ---` line starts a table of its own.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

// Booleans too: loadConfig's typed overrides (tests, the stack) pass them as such.
const bool = z.union([
  z.boolean(),
  z.enum(['1', '0', 'true', 'false', 'yes', 'no', '']).transform((v) => v === '1' || v === 'true' || v === 'yes'),
]);
const int = (d: number) => z.coerce.number().int().default(d);

export const EnvSchema = z.object({
  /** `production` (the Dockerfile sets it) refuses the public development defaults of the secrets. */
  NODE_ENV: z.string().default('development'),
  /** pino level; logs are JSON with tenant/app/conversation/message/workflow ids (and `trace_id`/`span_id` with tracing on). */
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /** Where embedded PostgreSQL, the Temporal dev server db file and caches live. */
  DATA_DIR: z.string().default('.data'),

  // --- PostgreSQL -------------------------------------------------------------------------------
  /** External PostgreSQL; when unset `npm start` runs embedded PostgreSQL under DATA_DIR. */
  DATABASE_URL: z.string().optional(),
  /** The password of DATABASE_URL's user, kept out of the URL (a Secret's file: DATABASE_PASSWORD_FILE; the Helm
   * chart, docs/deploying.md): put into the URL percent-encoded, and wins over a password the URL holds. */
  DATABASE_PASSWORD: z.string().optional(),
  /** The turn's hot reads and the streams' event reads (core/platform/hot-sql.ts) as named prepared statements, parsed once per connection.
   * `false` behind PgBouncer in transaction mode (a prepared statement lives on one server connection; the next
   * transaction may get another): the same statements go unnamed, parsed each time. */
  HOT_SQL_PREPARED: bool.default(true),
  /** How long opening a LISTEN connection (the api's event notifier and credential watch) may take before the attempt
   * counts as failed and is retried, in ms. A loaded server can take seconds to accept; the pool waits as long. */
  PG_LISTEN_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** Port of the embedded PostgreSQL. */
  EMBEDDED_PG_PORT: int(54329),
  /** Embedded PostgreSQL flushes commits to disk (fsync, synchronous commit). `false` trades safety
   * against an OS crash or power loss (not a process crash) for speed: the test suite's throwaway cluster. */
  EMBEDDED_PG_DURABLE: bool.default(true),
  /** `npm start`'s Ctrl-C: how long turns in flight get to finish before the stack stops, in ms. */
  SHUTDOWN_DRAIN_MS: int(30_000),

  // --- Temporal ---------------------------------------------------------------------------------
  /** External Temporal frontend (host:port); when unset `npm start` runs the dev server. */
  TEMPORAL_ADDRESS: z.string().optional(),
  /** Temporal namespace of the turn workflows. */
  TEMPORAL_NAMESPACE: z.string().default('default'),
  /** Task queue of the turn workflows and their activities. */
  TEMPORAL_TASK_QUEUE: z.string().default('agent-turns'),
  /** Explicit path of the `temporal` CLI binary (first place the locator looks). */
  TEMPORAL_CLI_PATH: z.string().optional(),
  /** The dev server's frontend and Web UI ports (`npm start`). */
  TEMPORAL_DEV_PORT: int(7233),
  TEMPORAL_UI_PORT: int(8233),
  /** Base URL of the Temporal Web UI the studio links turns to (`npm start`: the dev server's UI). Unset: no link. */
  TEMPORAL_UI_URL: z.string().url().optional(),
  /** TLS to the Temporal frontend. Unset: on when TEMPORAL_API_KEY or any TEMPORAL_TLS_* file is set, else off. */
  TEMPORAL_TLS: bool.optional(),
  /** TLS server name (SNI) to expect, when it differs from the host of TEMPORAL_ADDRESS. */
  TEMPORAL_TLS_SERVER_NAME: z.string().optional(),
  /** PEM file of the CA that signed the server's certificate (else the system's CAs). */
  TEMPORAL_TLS_CA_FILE: z.string().optional(),
  /** mTLS: PEM files of this client's certificate and private key (both or neither). */
  TEMPORAL_TLS_CERT_FILE: z.string().optional(),
  TEMPORAL_TLS_KEY_FILE: z.string().optional(),
  /** API key (Temporal Cloud, or a server with an authorizer): sent as `Authorization: Bearer`. */
  TEMPORAL_API_KEY: z.string().optional(),

  // --- api --------------------------------------------------------------------------------------
  /** The api's listen address. */
  API_HOST: z.string().default('127.0.0.1'),
  API_PORT: int(5001),
  /** Slow clients (docs/security.md): time to send the request headers, and the whole request, ms. */
  HTTP_HEADERS_TIMEOUT_MS: int(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(120_000),
  /** Public base URL of the api, as the agent backend reaches it (inner API callbacks); default http://API_HOST:API_PORT. */
  API_INTERNAL_URL: z.string().optional(),
  /** Shared secret of the inner API (`X-Inner-Api-Key`). */
  INNER_API_KEY: z.string().default('dev-inner-api-key-change-me'),
  /** HMAC key of the execution contexts the worker signs and the inner API verifies; distinct from
   * INNER_API_KEY so the agent backend cannot mint one (docs/security.md). Used by the api and the worker only. */
  EXECUTION_CONTEXT_SIGNING_KEY: z.string().default('dev-execution-context-key-change-me'),
  /** How long a signed execution context is honoured, ms (and only while its turn is in progress). */
  EXECUTION_CONTEXT_TTL_MS: int(2 * 3_600_000),
  /** 32-byte key (hex or base64) for AES-256-GCM encryption of provider credentials at rest; also keys the signed file links. */
  ENCRYPTION_KEY: z.string().default('0000000000000000000000000000000000000000000000000000000000000001'),
  /** Text-delta debounce window for `agent_message` events, in ms. It grows by itself per second of the answer, up to 3×
   * (core/platform/stream-window.ts: a long or slowed stream is written less often), and with the runs the worker
   * consumes at once, up to 2× more (docs/decisions/0014); the first text is never held. */
  DELTA_DEBOUNCE_MS: int(50),
  /** SSE keep-alive ping interval, in ms. */
  SSE_PING_MS: int(10_000),
  /** How long a stop waits for the backend's run_cancelled before keeping what it has, in ms. */
  STOP_WAIT_MS: int(15_000),
  /** Requests per minute per app key, and per (app, user) on requests naming a user; 429 + Retry-After above. */
  RATE_LIMIT_KEY_PER_MINUTE: int(600),
  RATE_LIMIT_USER_PER_MINUTE: int(120),
  /** Concurrent event streams (chat requests and re-attaches) per app key and per (app, user). */
  STREAMS_PER_KEY: int(200),
  STREAMS_PER_USER: int(10),
  /** Concurrent turns in progress (pending or running) per app and per end user. */
  TURNS_PER_KEY: int(100),
  TURNS_PER_USER: int(5),
  /** Admission control (docs/failure-modes.md): turns in flight (pending or running messages) across the deployment,
   * counted in PostgreSQL so every api replica shares it. A turn beyond it is refused before anything is written: 503
   * `server_busy` + Retry-After. Unset: WORKER_COUNT × WORKER_MAX_CONCURRENT_ACTIVITIES (a turn in flight holds one
   * runAgent activity slot); 0: no cap. */
  MAX_TURNS_IN_FLIGHT: z.coerce.number().int().min(0).optional(),
  /** How long a signed file link (message_files url) is valid, seconds; links are re-signed when read. */
  FILE_LINK_TTL_S: int(3_600),
  /** Deepest nesting (objects + arrays) accepted in any JSON body, api and agent backend (docs/security.md); deeper: 400
   * naming the field. */
  JSON_MAX_DEPTH: z.coerce.number().int().min(8).max(1_000).default(64),

  /** What a process does with an error no handler caught (core/platform/process-guard.ts): `log` it at fatal with its stack,
   * count it (agent_process_uncaught_errors_total) and keep serving, or `exit` 1 after that (a supervisor restarts it). */
  UNCAUGHT_ERROR_POLICY: z.enum(['log', 'exit']).default('log'),

  // --- knowledge: parsing, indexing, quotas (docs/knowledge.md, docs/security.md) --------------------------
  /** Document parsing (HTML, PDF) runs in a child process with these limits; a limit hit is 400 `document_unreadable`. */
  KNOWLEDGE_PARSE_TIMEOUT_MS: int(60_000),
  /** Address space (RLIMIT_AS) of the parse process, MB; its V8 heap gets a quarter of it. Node itself reserves ~0.8 GB
   * of it (from sources, under tsx, ~1.2 GB): below ~1.5 GB little is left for the document. */
  KNOWLEDGE_PARSE_MEMORY_MB: z.coerce.number().int().min(1_024).default(2_048),
  /** Most pages of a PDF. */
  KNOWLEDGE_PARSE_MAX_PAGES: z.coerce.number().int().min(1).default(5_000),
  /** Most text one document may decode to, bytes (UTF-8). */
  KNOWLEDGE_PARSE_MAX_TEXT_BYTES: z.coerce
    .number()
    .int()
    .min(1_024)
    .default(20 * 1024 * 1024),
  /** How long an upload waits for its document's indexing before answering 202 with the document still indexing, ms. */
  KNOWLEDGE_INDEX_WAIT_MS: z.coerce.number().int().min(0).default(2_000),
  /** Documents one api process indexes at once. */
  KNOWLEDGE_INDEX_CONCURRENCY: z.coerce.number().int().min(1).default(1),
  /** Per tenant: datasets (403 `dataset_quota_exceeded`), documents (403 `document_quota_exceeded`) and bytes of stored
   * documents (413 `storage_quota_exceeded`). 0: no limit. */
  TENANT_MAX_DATASETS: z.coerce.number().int().min(0).default(100),
  TENANT_MAX_DOCUMENTS: z.coerce.number().int().min(0).default(10_000),
  TENANT_MAX_DOCUMENT_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(2 * 1024 * 1024 * 1024),
  /** Per tenant: bytes of stored uploads (POST /v1/files/upload and remote_url files of chat requests, counted from
   * upload_files under a per-tenant lock; 413 `storage_quota_exceeded`, core/domain/upload-quota.ts). Default 5 GiB; 0: no limit. */
  TENANT_MAX_UPLOAD_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(5 * 1024 * 1024 * 1024),
  /** Per tenant: bytes of the workspace copies forks made (POST …/fork), counted while their workspace is active (a deleted
   * fork frees its share), under a per-tenant lock; one copy is also bounded by WORKSPACE_QUOTA_BYTES. Over it: 413
   * `workspace_quota_exceeded`, nothing left behind (api/service/fork.ts). Default 10 GiB; 0: no limit. */
  TENANT_MAX_WORKSPACE_COPY_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(10 * 1024 * 1024 * 1024),

  // --- worker ---------------------------------------------------------------------------------
  /** The worker's HTTP port: `GET /healthz` ({temporal, database}), `/readyz` (+ polling) and `/metrics`. A standalone
   * worker without it serves none; the stack's in-process worker then takes a free port. */
  WORKER_HEALTH_PORT: z.coerce.number().int().positive().optional(),
  /** Where the worker's HTTP port listens (0.0.0.0 in a container, so Prometheus can scrape it). */
  WORKER_HEALTH_HOST: z.string().default('127.0.0.1'),
  /** Worker slots (Temporal WorkerOptions): activities at once (each turn in flight holds one for runAgent), local
   * activities (prepareTurn), workflow tasks, and the sticky cache of workflows (unset: the SDK's, from the heap size). */
  WORKER_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).default(200),
  WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: z.coerce.number().int().min(1).default(100),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: z.coerce.number().int().min(2).default(100),
  WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).optional(),
  /** From sources only (a compiled worker loads dist/workflow-bundle.js): a directory where the worker keeps its bundle of
   * workflows/ and reuses it while every file in it is unchanged (worker/workflow-bundle-cache.ts), instead of bundling at
   * each start. The test suite sets it (.cache/workflow-bundles); unset, every start bundles. */
  WORKER_WORKFLOW_BUNDLE_CACHE_DIR: z.string().min(1).optional(),
  /** How many workers serve the task queue: with WORKER_MAX_CONCURRENT_ACTIVITIES, the default MAX_TURNS_IN_FLIGHT. */
  WORKER_COUNT: z.coerce.number().int().min(1).default(1),
  /** The turn sweeper (worker/sweeper.ts, issue 30) of every worker: a pass every INTERVAL ms over at most BATCH messages
   * (and BATCH locks) untouched for MIN_AGE ms. MIN_AGE stays above a turn start's 10 s bound (api/turns/start.ts), so a start
   * in flight is never taken for an orphan. */
  TURN_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).default(5_000),
  TURN_SWEEP_MIN_AGE_MS: z.coerce
    .number()
    .int()
    .min(15_000, 'must be at least 15000: a turn start may take 10 s (api/turns/start.ts) and is not an orphan')
    .default(20_000),
  TURN_SWEEP_BATCH: z.coerce.number().int().min(1).max(10_000).default(100),
  /** Per-message session snapshots (regenerate and fork, docs/ARCHITECTURE.md "Threads, regenerate and fork"): a
   * conversation keeps the snapshots of the last N messages of each branch and of every branch point; older ones are
   * pruned (a regenerate from there answers 409 `session_snapshot_pruned`). */
  SESSION_SNAPSHOTS_PER_BRANCH: z.coerce.number().int().min(1).max(10_000).default(10),
  /** The inspector's record of what each model request was sent (message_model_inputs, issue 42) is kept this many days
   * after the request; the worker's sweeper deletes older rows (core/domain/llm/model-input-retention.ts). The turn's
   * answer, thoughts and usage are not affected. */
  MODEL_INPUT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** Multitask strategies (issue 35, docs/ARCHITECTURE.md "Multitask strategies"): at most this many messages wait in
   * one conversation's queue; one more is refused with 429 `conversation_queue_full`. */
  CONVERSATION_QUEUE_LIMIT: z.coerce.number().int().min(1).max(10_000).default(100),
  /** How often the conversation queue's claim activity looks whether the turn in flight has ended, in ms. */
  CONVERSATION_QUEUE_POLL_MS: z.coerce.number().int().min(20).max(10_000).default(200),

  // --- agent backend ----------------------------------------------------------------------------
  /** The reference agent backend's listen address. */
  AGENT_BACKEND_HOST: z.string().default('127.0.0.1'),
  AGENT_BACKEND_PORT: int(5002),
  /** External agent backend; when unset `npm start` runs the reference backend. */
  AGENT_BACKEND_URL: z.string().optional(),
  /** Bearer token the api presents to the agent backend. */
  AGENT_BACKEND_TOKEN: z.string().default('dev-backend-token-change-me'),
  /** runAgent reattaches when a run's event stream is silent this long (no event, no keep-alive), in ms. */
  AGENT_BACKEND_STREAM_IDLE_MS: int(30_000),
  /** Largest run request body the agent backend parses (after its token check), bytes. */
  AGENT_BACKEND_MAX_BODY_BYTES: int(8 * 1024 * 1024),
  /** Backend-side coalescing of text deltas (ms / chars); the window grows like DELTA_DEBOUNCE_MS's (age and load). */
  BACKEND_DELTA_COALESCE_MS: int(100),
  BACKEND_DELTA_COALESCE_CHARS: int(4096),
  /** Run budgets: model requests, tool calls and wall clock of one backend run (agent-backend/README.md "Limits"). */
  RUN_MAX_MODEL_REQUESTS: int(25),
  RUN_MAX_TOOL_CALLS: int(50),
  RUN_MAX_WALL_CLOCK_MS: int(600_000),
  /** How long the agent backend keeps a finished run and its events, hours. */
  RUN_RETENTION_HOURS: int(72),
  /** Runs one agent backend process executes at once; POST /runs beyond it answers 503 `backend_busy` + Retry-After
   * (runAgent retries it). 0: no cap. */
  MAX_RUNS_PER_BACKEND: z.coerce.number().int().min(0).default(200),
  /** The run lease (issue 30, docs/failure-modes.md): its owner renews it every RENEW ms on a connection of its own;
   * unrenewed for TTL ms it has lapsed, and every replica's reaper, every REAP_INTERVAL ms, fails the run
   * `backend_restarted`. A dead backend's runs fail within about TTL + REAP_INTERVAL of its last renewal. TTL is at
   * least 3× RENEW (a late renewal or two is no death) and REAP_INTERVAL at most TTL (checkLease). */
  AGENT_RUN_LEASE_RENEW_MS: z.coerce.number().int().min(50).default(1_000),
  AGENT_RUN_LEASE_TTL_MS: z.coerce.number().int().min(150).default(5_000),
  AGENT_RUN_REAP_INTERVAL_MS: z.coerce.number().int().min(50).default(1_000),

  // --- agent workspace: runtime + shell (docs/workspace.md) ------------------------------
  /** Where workspaces live (one directory per workspace id); default DATA_DIR/workspaces. */
  WORKSPACES_DIR: z.string().optional(),
  /** Deployment auth token shellctl checks on every call; runtime/shell are unavailable while it is blank. */
  SHELLCTL_AUTH_TOKEN: z.string().optional(),
  /** shellctl's side of the token (a file the sandbox cannot read); default DATA_DIR/sandbox/shellctl.token,
   * written from SHELLCTL_AUTH_TOKEN when missing. */
  SHELLCTL_TOKEN_FILE: z.string().optional(),
  /** A prebuilt shellctl; default: built from sandbox/ into .cache/sandbox (Go toolchain needed). */
  SHELLCTL_PATH: z.string().optional(),
  /** The Go binary that builds shellctl (else `go` on PATH, else /usr/local/go/bin/go). */
  GO_BIN: z.string().optional(),
  /** Where a workspace lives between turns (docs/workspace.md "Workspaces on object storage"): `posix`, WORKSPACES_DIR is
   * the one shared directory of every api, worker and agent backend (the one-machine default); `s3`, each agent backend
   * keeps a local copy under its own WORKSPACES_DIR, restored from the bucket when a run enters the workspace and saved
   * to it (content-addressed blobs, a manifest per version, a `latest` pointer written last) when the run ends. */
  WORKSPACE_STORE: z.enum(['posix', 's3']).default('posix'),
  /** The S3 endpoint (e.g. `http://127.0.0.1:8333` for SeaweedFS); unset: AWS's own for S3_REGION. */
  S3_ENDPOINT: z.string().url().optional(),
  /** The bucket the workspaces are saved in (it must exist); required with WORKSPACE_STORE=s3. */
  S3_BUCKET: z.string().min(3).max(63).optional(),
  /**
   * Key prefix of every object the workspace store writes (`<prefix><workspace id>/...`); ends with `/` (or is empty:
   * the bucket's root), because the sweeper's GC lists everything under it as this deployment's workspaces.
   */
  S3_PREFIX: z.string().max(200).default('workspaces/'),
  /** The bucket's region (what requests are signed for; SeaweedFS accepts any). */
  S3_REGION: z.string().min(1).default('us-east-1'),
  /** Static credentials (or S3_ACCESS_KEY_ID_FILE / S3_SECRET_ACCESS_KEY_FILE); unset: the AWS SDK's default chain. */
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  /** Path-style URLs (`endpoint/bucket/key`), which SeaweedFS and most S3 servers other than AWS's need. */
  S3_FORCE_PATH_STYLE: bool.default(false),
  /**
   * The sweeper's GC of the workspace bucket (WORKSPACE_STORE=s3): blobs and manifest versions younger than this are
   * never deleted, so a save between its blob uploads and its manifest is never robbed of a blob (docs/workspace.md).
   */
  S3_GC_GRACE_MS: z.coerce.number().int().min(60_000).default(3_600_000),
  /** Manifest versions kept per workspace besides the latest (older ones past the grace period are deleted). */
  S3_KEEP_VERSIONS: z.coerce.number().int().min(0).max(1000).default(3),
  /** Isolation of shell commands (namespaces, Landlock, own uid, seccomp, limits). `off` runs them unconfined (logged loudly). */
  SHELL_ISOLATION: z.enum(['on', 'off']).default('on'),
  /** What shell commands reach: `stub` = the agent stub's unix socket, mounted into the sandbox (the CLI works); `none` = nothing. */
  SHELL_NETWORK: z.enum(['stub', 'none']).default('stub'),
  /** Upper bound of one shell command's time limit, ms (an agent's soul may set a lower one). */
  SHELL_TIMEOUT_MS: int(60_000),
  /** Upper bound of the stdout/stderr kept per command, bytes each (the rest is cut with a marker). */
  SHELL_MAX_OUTPUT_BYTES: int(16_384),
  /** Largest file a shell command may hand back from `outputs/` as a message file, bytes (docs/workspace.md). */
  WORKSPACE_OUTPUT_MAX_BYTES: int(10 * 1024 * 1024),
  /** Bytes of `outputs/` files one turn may attach as message files; the rest is reported as not attached (issue 27). */
  OUTPUT_FILES_MAX_BYTES_PER_TURN: int(20 * 1024 * 1024),
  /** Bytes of `outputs/` files one tenant may attach in 24 hours (counted from its stored agent-output uploads). */
  OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY: int(500 * 1024 * 1024),
  // Issue 27: the sandbox as a boundary between tenants (docs/security.md "The shell sandbox"; passed to shellctl).
  /** Processes (tasks) one command may run at once. */
  SHELL_LIMIT_PROCS: z.coerce.number().int().min(8).default(256),
  /** Memory of one command's process tree, bytes (cgroup memory.max; under rlimits the address space per process). */
  SHELL_LIMIT_MEMORY_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024 * 1024)
    .default(1024 * 1024 * 1024),
  /** CPU time of one command, seconds (the wall-clock limit is SHELL_TIMEOUT_MS). */
  SHELL_LIMIT_CPU_SECONDS: z.coerce.number().int().min(1).default(60),
  /** Largest file a command may write, bytes. */
  SHELL_LIMIT_FILE_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .default(256 * 1024 * 1024),
  /** Open files per process. */
  SHELL_LIMIT_OPEN_FILES: z.coerce.number().int().min(64).default(1024),
  /** Bytes one workspace may hold (allocated blocks): one file is cut at what is left (RLIMIT_FSIZE); a command that grows
   * it past the quota with many files is stopped (`limit: workspace_quota`) by a watch every max(100 ms, 4× its walk).
   * Overshoot measured on a loaded 2-core host: ≤ 105 MiB (16–64 parallel writers), ~490 MiB in a directory of 100k files. */
  WORKSPACE_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .default(1024 * 1024 * 1024),
  /** Commands run as uid/gid SHELL_UID_BASE + FNV-1a(workspace id) % SHELL_UID_RANGE (core/protocol/workspace-uid.ts). */
  SHELL_UID_BASE: z.coerce.number().int().min(1000).default(200_000),
  SHELL_UID_RANGE: z.coerce.number().int().min(1).default(100_000),
  /** The agent stub's own listener (a unix socket, bind-mounted into the sandbox); default DATA_DIR/sandbox/stub-<port>.sock. */
  AGENT_STUB_SOCKET: z.string().optional(),

  // --- tool providers: API and MCP tools (docs/tools.md) ---------------------------------------
  /** Time limit of one API/MCP tool call (and of an MCP server's tool listing), ms. */
  TOOL_TIMEOUT_MS: int(15_000),
  /** Response bytes kept of one tool call; the rest is cut with a marker. */
  TOOL_MAX_RESPONSE_BYTES: int(65_536),
  /** Let tool providers reach loopback/private addresses (tests, trusted on-premise tools); off: public only. */
  TOOL_ALLOW_PRIVATE_NETWORK: bool.default(false),
  /** Let the http_request builtin reach loopback/private addresses (tests, agents on a trusted network); off: public only. Its
   * own switch, not TOOL_ALLOW_PRIVATE_NETWORK: a provider's server is chosen by an app builder, this URL by the model. */
  HTTP_REQUEST_ALLOW_PRIVATE_NETWORK: bool.default(false),

  // --- webhooks (issue 35 item 4: core/domain/webhooks/) ------------------------------------------------
  /** Let webhook URLs reach loopback/private addresses (tests, receivers on a trusted network); off: public only. Its own
   * switch, not TOOL_ALLOW_PRIVATE_NETWORK: an app builder's webhook and a tool server are trusted separately. */
  WEBHOOK_ALLOW_PRIVATE_NETWORK: bool.default(false),
  /** A delivery's retries: first backoff, its cap (doubling in between), and how long a delivery keeps trying. */
  WEBHOOK_RETRY_INITIAL_MS: int(10_000),
  WEBHOOK_RETRY_MAX_INTERVAL_MS: int(3_600_000),
  WEBHOOK_RETRY_FOR_MS: int(86_400_000),
  /** One delivery attempt's deadline (connect to full response). */
  WEBHOOK_TIMEOUT_MS: int(10_000),
  /** How often the worker's webhook dispatcher looks for deliveries to start. */
  WEBHOOK_DISPATCH_POLL_MS: int(1_000),

  // --- automation limits (issue 47: docs/security.md "Limits and their settings") --------------------------------
  /** The shortest time between two runs of one schedule, seconds: its `interval_seconds`, or the two closest times of
   * its cron (seconds fields and `@every` included); shorter is 400 `schedule_interval_too_short`. */
  SCHEDULE_MIN_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
  /** Schedules one app / one tenant may hold (403 `schedule_quota_exceeded`). 0: no limit. */
  SCHEDULES_PER_APP: z.coerce.number().int().min(0).default(20),
  SCHEDULES_PER_TENANT: z.coerce.number().int().min(0).default(100),
  /** Webhooks one app / one tenant may hold (403 `webhook_quota_exceeded`). 0: no limit. */
  WEBHOOKS_PER_APP: z.coerce.number().int().min(0).default(10),
  WEBHOOKS_PER_TENANT: z.coerce.number().int().min(0).default(50),
  /** Webhook deliveries started per minute (a fixed window) for one app / one tenant; the others wait for the next
   * window — delayed, never dropped, so a receiver still gets every event. 0: no limit. */
  WEBHOOK_DELIVERIES_PER_MINUTE_PER_APP: z.coerce.number().int().min(0).default(120),
  WEBHOOK_DELIVERIES_PER_MINUTE_PER_TENANT: z.coerce.number().int().min(0).default(600),
  /** The window those two count in, seconds: a minute (tests shorten it). */
  WEBHOOK_DELIVERY_RATE_WINDOW_S: z.coerce.number().int().min(1).max(3_600).default(60),

  // --- models -----------------------------------------------------------------------------------
  /** Per-token delay of the deterministic demo model, in ms. */
  DEMO_MODEL_TOKEN_DELAY_MS: int(15),
  /** Point the demo app at a real OpenAI-compatible endpoint (Ollama, vLLM, ...). */
  OPENAI_COMPATIBLE_BASE_URL: z.string().optional(),
  OPENAI_COMPATIBLE_API_KEY: z.string().optional(),
  OPENAI_COMPATIBLE_MODEL: z.string().optional(),
  /**
   * System-hosted model providers (docs/models.md): calls on them are billed through the tenant's credit pool;
   * a tenant's own credentials (console /model-providers) win and are unbilled. `*_BASE_URL` points at a proxy.
   */
  OPENAI_API_KEY: z.string().optional(),
  OPENAI_BASE_URL: z.string().optional(),
  ANTHROPIC_API_KEY: z.string().optional(),
  ANTHROPIC_BASE_URL: z.string().optional(),
  GOOGLE_GENERATIVE_AI_API_KEY: z.string().optional(),
  GOOGLE_BASE_URL: z.string().optional(),
  AZURE_API_KEY: z.string().optional(),
  AZURE_RESOURCE_NAME: z.string().optional(),
  AZURE_BASE_URL: z.string().optional(),
  AZURE_API_VERSION: z.string().optional(),
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  AWS_SESSION_TOKEN: z.string().optional(),
  AWS_REGION: z.string().optional(),
  BEDROCK_BASE_URL: z.string().optional(),
  /** Ollama's native API, e.g. http://127.0.0.1:11434/api. */
  OLLAMA_BASE_URL: z.string().optional(),
  /** Let a workspace's own model credentials point at loopback/private addresses (a tenant's Ollama on this host); off: public only. */
  MODEL_ALLOW_PRIVATE_NETWORK: bool.default(false),
  /** Catalogue overrides and custom models (core/domain/llm/catalogue/index.ts): JSON text or `@/path/file.json`. */
  MODEL_CATALOGUE_OVERRIDES: z.string().optional(),
  /**
   * Time allowed from a model call's start to the provider's first streamed part, ms: over it the call ends
   * `provider_timeout` (retried while nothing was streamed). Unset: the catalogue's per-model default
   * (docs/models.md "Stream timeouts"); 0: none.
   */
  MODEL_FIRST_TOKEN_TIMEOUT_MS: z.coerce.number().int().nonnegative().optional(),
  /** Longest silence between two streamed parts of a model call, ms; unset: the catalogue's default; 0: none. */
  MODEL_IDLE_TIMEOUT_MS: z.coerce.number().int().nonnegative().optional(),
  /** The demo agent's model on first start, `provider/model` (default: the first configured provider's, else demo). */
  DEMO_AGENT_MODEL: z.string().optional(),

  // --- ask_human --------------------------------------------------------------------------------
  /** How long an ask_human form waits for its answer before the turn ends unanswered, hours. */
  HUMAN_INPUT_FORM_EXPIRY_HOURS: z.coerce.number().positive().default(36),

  // --- observability (docs/operations.md "Observability") --------------------------------------------------
  /** Prometheus metrics: `/metrics` on the api, the worker and the agent backend. Off: no endpoint, nothing recorded. */
  METRICS_ENABLED: bool.default(true),
  /** OTLP/HTTP collector base URL (e.g. http://otel-collector:4318): traces are exported there; unset: no tracing. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  /** service.name of the exported spans; default the process's role (dify-agent-api, -worker, -agent-backend, -stack). */
  OTEL_SERVICE_NAME: z.string().optional(),

  // --- testing ----------------------------------------------------------------------------------
  /** Set by CI (.ci/run): tests that would otherwise skip for a missing tool (Chromium) fail instead. */
  CI: bool.default(false),
  /** Tests: shellctl behaves as if the kernel had no Landlock. */
  SHELLCTL_FORCE_NO_LANDLOCK: bool.default(false),
  /** Tests: shellctl behaves as if the kernel's Landlock ABI were this (0: none). */
  SHELLCTL_FORCE_ABI: z.coerce.number().int().min(0).optional(),
  /** Tests: shellctl behaves as if namespaces were unavailable. */
  SHELLCTL_FORCE_NO_NAMESPACES: bool.default(false),
  /** Tests: shellctl enforces limits with rlimits only (no cgroup). */
  SHELLCTL_FORCE_RLIMITS: bool.default(false),
});

export type Env = z.infer<typeof EnvSchema>;

export interface Config extends Env {
  dataDir: string;
  /** WORKSPACES_DIR resolved (default DATA_DIR/workspaces). */
  workspacesDir: string;
  apiUrl: string;
  agentBackendUrl: string;
}

/** The admission cap on turns in flight (MAX_TURNS_IN_FLIGHT, else derived from the workers' activity slots); 0: none. */
export function maxTurnsInFlight(c: Pick<Env, 'MAX_TURNS_IN_FLIGHT' | 'WORKER_COUNT' | 'WORKER_MAX_CONCURRENT_ACTIVITIES'>): number {
  return c.MAX_TURNS_IN_FLIGHT ?? c.WORKER_COUNT * c.WORKER_MAX_CONCURRENT_ACTIVITIES;
}

/** The secrets whose built-in defaults are public (dev only): production refuses them (issue 17 L7). */
export const SECRET_VARS = ['INNER_API_KEY', 'AGENT_BACKEND_TOKEN', 'ENCRYPTION_KEY', 'EXECUTION_CONTEXT_SIGNING_KEY'] as const;

/** Which secrets still hold their public development default. */
export function devDefaultSecrets(e: Pick<Env, (typeof SECRET_VARS)[number]>): string[] {
  const defaults = EnvSchema.parse({});
  return SECRET_VARS.filter((k) => e[k] === defaults[k]);
}

/**
 * The secrets a command in the agent's sandbox could use to cross tenants (stub tokens are HMACs under the backend
 * token; the inner API trusts its key): runtime and shell are refused while either holds its public default (issue 27).
 * ENCRYPTION_KEY protects credentials at rest, which no command can read; EXECUTION_CONTEXT_SIGNING_KEY is checked by
 * the api, which holds it (the workspace authorization, api/inner/execution-context-verify.ts).
 */
export function sandboxWeakSecrets(e: Pick<Env, 'INNER_API_KEY' | 'AGENT_BACKEND_TOKEN'>): string[] {
  const defaults = EnvSchema.parse({});
  return (['AGENT_BACKEND_TOKEN', 'INNER_API_KEY'] as const).filter((k) => e[k] === defaults[k]);
}

/** Whether the environment gives `key` (itself or as `<key>_FILE`); unset ones may be generated (core/platform/local-secrets.ts). */
export function envSets(env: NodeJS.ProcessEnv, key: string): boolean {
  return Boolean(env[key]) || Boolean(env[`${key}_FILE`]);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Env> = {}): Config {
  const parsed = EnvSchema.superRefine(checkTemporalTls)
    .superRefine(checkLease)
    .superRefine(checkWorkspaceStore)
    .safeParse({ ...pick(env), ...overrides });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
    throw new Error(`Invalid configuration:\n${lines}`);
  }
  const e = parsed.data;
  if (e.NODE_ENV === 'production') {
    const weak = devDefaultSecrets(e);
    if (weak.length)
      throw new Error(
        `Invalid configuration: NODE_ENV=production refuses the development default of ${weak.join(', ')}; set your own secrets.`,
      );
    if (e.EXECUTION_CONTEXT_SIGNING_KEY === e.INNER_API_KEY) {
      throw new Error(
        'Invalid configuration: EXECUTION_CONTEXT_SIGNING_KEY must differ from INNER_API_KEY (the agent backend holds the inner API key).',
      );
    }
  }
  return {
    ...e,
    DATABASE_URL: withPassword(e.DATABASE_URL, e.DATABASE_PASSWORD),
    dataDir: path.resolve(e.DATA_DIR),
    workspacesDir: path.resolve(e.WORKSPACES_DIR ?? path.join(e.DATA_DIR, 'workspaces')),
    apiUrl: e.API_INTERNAL_URL ?? `http://${e.API_HOST}:${e.API_PORT}`,
    agentBackendUrl: e.AGENT_BACKEND_URL ?? `http://${e.AGENT_BACKEND_HOST}:${e.AGENT_BACKEND_PORT}`,
  };
}

/** DATABASE_URL with DATABASE_PASSWORD as its password, percent-encoded whole (the URL setter alone keeps `%`). */
function withPassword(url: string | undefined, password: string | undefined): string | undefined {
  if (!url || password === undefined) return url;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error('Invalid configuration: DATABASE_PASSWORD is set but DATABASE_URL is not a URL (postgresql://user@host:port/db)');
  }
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** mTLS needs both halves: one without the other would silently connect without a client certificate. */
function checkTemporalTls(e: Env, ctx: z.RefinementCtx): void {
  if (Boolean(e.TEMPORAL_TLS_CERT_FILE) !== Boolean(e.TEMPORAL_TLS_KEY_FILE))
    ctx.addIssue({
      code: 'custom',
      path: ['TEMPORAL_TLS_CERT_FILE'],
      message: 'set TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE together (mTLS)',
    });
}

/**
 * WORKSPACE_STORE=s3 needs its bucket, static credentials come in pairs, and S3_PREFIX is a "directory": the sweeper's GC
 * (core/domain/workspace-bucket.ts) lists every key under the prefix as one of this deployment's workspaces and deletes
 * what no manifest of it references, so a prefix `prod` would also sweep a neighbour's `prod-eu/...` (or `production/`)
 * in the same bucket, as workspaces without a pointer: all of it, once older than the grace period.
 */
export function checkWorkspaceStore(e: Env, ctx: z.RefinementCtx): void {
  if (e.WORKSPACE_STORE !== 's3') return;
  if (!e.S3_BUCKET) ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'is required with WORKSPACE_STORE=s3' });
  if (e.S3_PREFIX !== '' && !e.S3_PREFIX.endsWith('/'))
    ctx.addIssue({
      code: 'custom',
      path: ['S3_PREFIX'],
      message: `must end with '/' (e.g. '${e.S3_PREFIX}/'): the bucket GC would otherwise sweep every key that merely starts with '${e.S3_PREFIX}', another prefix's objects included`,
    });
  if (!e.S3_ACCESS_KEY_ID !== !e.S3_SECRET_ACCESS_KEY)
    ctx.addIssue({
      code: 'custom',
      path: ['S3_SECRET_ACCESS_KEY'],
      message: 'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are set together or not at all',
    });
}

/** The run lease's timings agree: a TTL of under 3 renewals reaps a merely slow owner; a reaper checking less often
 * than the TTL lets a dead one's runs hang for longer than the lease promises. */
export function checkLease(e: Env, ctx: z.RefinementCtx): void {
  if (e.AGENT_RUN_LEASE_TTL_MS < 3 * e.AGENT_RUN_LEASE_RENEW_MS)
    ctx.addIssue({
      code: 'custom',
      path: ['AGENT_RUN_LEASE_TTL_MS'],
      message: `must be at least 3× AGENT_RUN_LEASE_RENEW_MS (${3 * e.AGENT_RUN_LEASE_RENEW_MS}): a lease lapsing after fewer than 3 missed renewals reaps a slow owner`,
    });
  if (e.AGENT_RUN_REAP_INTERVAL_MS > e.AGENT_RUN_LEASE_TTL_MS)
    ctx.addIssue({
      code: 'custom',
      path: ['AGENT_RUN_REAP_INTERVAL_MS'],
      message: `must be at most AGENT_RUN_LEASE_TTL_MS (${e.AGENT_RUN_LEASE_TTL_MS}): a lapsed lease would wait longer than the lease itself`,
    });
}

/**
 * The variables this schema knows, from the environment. Any of them may instead be given as `<NAME>_FILE`, the
 * path of a file holding the value (Docker / Kubernetes secrets), so secrets need not sit in the environment or
 * in a compose file; the variable itself wins when both are set.
 */
function pick(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(EnvSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') out[key] = v;
    else if (env[`${key}_FILE`]) out[key] = readSecretFile(`${key}_FILE`, env[`${key}_FILE`]!);
  }
  return out;
}

function readSecretFile(name: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
  } catch (err) {
    throw new Error(
      `Invalid configuration: ${name}=${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
}
