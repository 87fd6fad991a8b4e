/**
 * buildRunRequest (docs/seeds/000 AgentAppRuntimeRequestBuilder): the layer composition for the agent backend,
 * the retained session snapshot and deferred tool results. The request is stored on AgentBackendRun
 * (not returned): snapshots grow with the conversation and must stay out of workflow history.
 */
import { bucketOf } from '../../core/domain/workspace-bucket.js';
import path from 'node:path';
import type { LayerSpec, SessionSnapshot, CreateRunRequest, DeferredToolResult } from '../../core/protocol/run.js';
import { deferredResultFromForm } from '../../core/domain/human-input.js';
import { resignFileUrl } from '../../core/domain/uploads.js';
import { withProviderTools } from '../../core/domain/tools/providers.js';
import type { ActivityDeps } from '../deps.js';
import { SESSION_CONFIG_CHANGED_MESSAGE, turnFailure } from '../errors.js';
import type { AgentBackendRun } from '../../core/generated/prisma/client.js';
import type { Binding } from '../../core/domain/turn/bindings.js';
import { placeTurnFiles } from './workspace-files.js';
import { outputQuotaLimits } from '../../core/domain/output-quota.js';
import { workspaceUid } from '../../core/protocol/workspace-uid.js';
import type { Resolution } from './resolve-config.js';
import type { TurnContext } from './turn-context.js';
import { type BuildInput, buildComposition, contextWindowOf } from '../../core/domain/soul-composition.js';
import { LOST_WORKSPACE_NOTE, lostBindingHistory } from './lost-history.js';
import { CITATIONS_MARK } from '../../core/domain/knowledge/citations.js';

/** docs/seeds/000 _validate_session_snapshot_layers: topology must match; values may change. */
export function assertSnapshotMatches(layers: LayerSpec[], snapshot: SessionSnapshot | null): void {
  if (!snapshot) return;
  const a = layers.map((l) => l.name);
  const b = snapshot.layers.map((l) => l.name);
  if (a.length !== b.length || a.some((n, i) => n !== b[i])) {
    throw turnFailure('agent_session_configuration_changed', 409, SESSION_CONFIG_CHANGED_MESSAGE);
  }
}

type Soul = Awaited<ReturnType<typeof withProviderTools>>['soul'];
type Deferred = Record<string, DeferredToolResult>;

/**
 * The request in its steps: the tools as their providers list them, the turn's files placed in the workspace, what the
 * composition names (uploads, datasets, the model's limits, a lost workspace's history), the composition checked
 * against the snapshot, the deferred results, then the request stored in one statement.
 */
export function createBuildRunRequest(deps: ActivityDeps) {
  const { db, config } = deps;
  return async function buildRunRequest(
    ctx: TurnContext,
    r: Resolution,
    binding: Binding,
    /** Set when this message continues a paused turn: the form whose result resumes the run. */
    resumeFormId?: string,
  ): Promise<{ layers: number; hasSnapshot: boolean; deferredCalls: number; run?: AgentBackendRun; cites?: boolean }> {
    const { msg, agent, existingRun } = ctx;
    if (existingRun?.backend_run_id) {
      // Already sent: rebuilding could differ (e.g. a newer draft); the run is what it is.
      const req = existingRun.request as unknown as CreateRunRequest;
      return {
        layers: req.composition.layers.length,
        hasSnapshot: !!req.session_snapshot,
        deferredCalls: Object.keys(req.deferred_tool_results?.calls ?? {}).length,
      };
    }
    const { resolved } = r;
    // Each provider tool's description and JSON schema as its provider lists them now.
    const { soul, missing } = await withProviderTools(db, msg.tenant_id, r.soul);
    if (missing.length)
      throw turnFailure('tool_not_found', 400, `The agent config names tools that no longer exist: ${missing.join(', ')}.`);
    const workspaceFiles = soul.runtime.enabled && msg.files.length ? await placeFiles(deps, ctx, binding) : undefined;
    const { uploads, datasetNames, model, modelLimits, recovered } = await compositionLookups(deps, ctx, soul, binding);
    const layers = buildComposition(soul, {
      datasetNames,
      inputs: (msg.inputs as Record<string, unknown> | null) ?? {},
      tenantId: msg.tenant_id,
      appId: msg.app_id,
      agentId: agent.id,
      conversationId: msg.conversation_id,
      messageId: msg.id,
      userId: msg.end_user_id ?? msg.account_id ?? 'anonymous',
      userFrom: msg.end_user_id ? 'end-user' : 'account',
      invokeFrom: msg.invoke_from as BuildInput['invokeFrom'],
      configVersionId: resolved.configVersionId,
      query: msg.query,
      // A fresh signed link (they expire, issue 17 L5), on the origin the message was given.
      files: msg.files.map((f) => ({
        type: f.type === 'image' ? 'image' : 'document',
        url: (f.upload_file_id ? resignFileUrl(config, f.url, f.upload_file_id) : f.url) ?? undefined,
        ...(f.upload_file_id && uploads.has(f.upload_file_id) ? uploads.get(f.upload_file_id) : {}),
      })),
      supportsVision: model?.supports_vision ?? deps.modelSupportsVision?.(soul.model.provider, soul.model.model) ?? false,
      ...(modelLimits ? { model: modelLimits } : {}),
      ...(recovered ? { recoveredHistory: { messages: recovered, note: LOST_WORKSPACE_NOTE } } : {}),
      innerApiKey: config.EXECUTION_CONTEXT_SIGNING_KEY,
      contextTtlMs: config.EXECUTION_CONTEXT_TTL_MS,
      workspaceId: binding.workspace_id,
      workspaceExpected: expectsWorkspace(binding),
      workspaceGeneration: binding.generation,
      workspaceFiles,
      outputQuota:
        soul.runtime.enabled && soul.shell.enabled
          ? await outputQuotaLimits(db, config, { tenantId: msg.tenant_id, messageId: msg.id })
          : undefined,
    });
    const snapshot = (binding.session_snapshot as SessionSnapshot | null) ?? null;
    assertSnapshotMatches(layers, snapshot);
    const deferred = await deferredResults(deps, binding, resumeFormId);
    const mod = soul.features.moderation;
    const outputModeration =
      mod.output_enabled && mod.keywords.length ? { keywords: mod.keywords, preset_answer: mod.output_preset_answer } : undefined;
    const request: CreateRunRequest = {
      composition: { schema_version: 1, layers },
      purpose: 'agent_app',
      idempotency_key: `message-${msg.id}`,
      metadata: { message_id: msg.id, conversation_id: msg.conversation_id, backend_binding_ref: binding.backend_binding_ref },
      session_snapshot: snapshot,
      ...(Object.keys(deferred).length ? { deferred_tool_results: { calls: deferred } } : {}),
      on_exit: { default: 'suspend' },
    };
    // The answer cites the chunks it is given (issue 42 problem 6): the message says so for its end and its history.
    const cites = soul.knowledge.enabled && soul.features.retriever_resource.enabled;
    const run = await storeRunRequest(deps, {
      messageId: msg.id,
      request,
      binding,
      outputModeration,
      configVersionId: resolved.configVersionId,
      cites,
      closesPending: Object.keys(deferred).length > 0,
    });
    return { layers: layers.length, hasSnapshot: !!snapshot, deferredCalls: Object.keys(deferred).length, run, cites };
  };
}

/** Whether the binding's session already has a workspace (its snapshot holds the runtime layer). */
const expectsWorkspace = (binding: Binding) =>
  (binding.session_snapshot as SessionSnapshot | null)?.layers.some((l) => l.name === 'runtime') ?? false;

/** The turn's files into the workspace (uploads copied, remote URLs fetched by the pinned fetcher; a new version in s3). */
function placeFiles({ db, config }: ActivityDeps, { msg }: TurnContext, binding: Binding) {
  const bucket = bucketOf(config);
  return placeTurnFiles(
    { db, config },
    {
      workspaceDir: path.join(config.workspacesDir, binding.workspace_id),
      messageId: msg.id,
      files: msg.files,
      bucket: bucket
        ? { bucket, id: { workspaceId: binding.workspace_id, generation: binding.generation }, expectExisting: expectsWorkspace(binding) }
        : undefined,
      // Isolated commands run as the workspace's own uid: what is placed belongs to it (issue 27).
      owner:
        config.SHELL_ISOLATION === 'on'
          ? workspaceUid(binding.workspace_id, { base: config.SHELL_UID_BASE, range: config.SHELL_UID_RANGE })
          : undefined,
    },
  );
}

/** What the composition names besides the soul: the files' names and types, the datasets' names, the model's limits, and
 * a lost workspace's history rebuilt from the stored messages (issue 43 item 2). */
async function compositionLookups(deps: ActivityDeps, { msg }: TurnContext, soul: Soul, binding: Binding) {
  const { db } = deps;
  // The files' names and types, for the prompt (issue 31).
  const uploadIds = msg.files.flatMap((f) => (f.upload_file_id ? [f.upload_file_id] : []));
  const uploads = new Map(
    uploadIds.length
      ? (await db.uploadFile.findMany({ where: { id: { in: uploadIds } }, select: { id: true, name: true, mime_type: true } })).map((u) => [
          u.id,
          { name: u.name, mime_type: u.mime_type },
        ])
      : [],
  );
  const datasetNames = soul.knowledge.enabled
    ? new Map(
        (
          await db.dataset.findMany({
            where: { tenant_id: msg.tenant_id, id: { in: soul.knowledge.dataset_ids } },
            select: { id: true, name: true },
          })
        ).map((d) => [d.id, d.name]),
      )
    : undefined;
  const model = await deps.resolveModel?.(msg.tenant_id, soul.model.provider, soul.model.model);
  const modelLimits = model
    ? { context_window: model.context_window, max_output: model.entry?.max_output, prices: model.pricing }
    : undefined;
  const recovered = await lostBindingHistory(db, {
    binding,
    messageId: msg.id,
    conversationId: msg.conversation_id,
    soul,
    limits: { contextWindow: contextWindowOf(soul, modelLimits).context_window, maxOutput: modelLimits?.max_output },
  });
  return { uploads, datasetNames, model, modelLimits, recovered };
}

/**
 * Deferred tool results: the submitted/expired form of this continuation, or — for a new turn after a stop while a
 * form waited — the dangling call closed as `unavailable`.
 */
async function deferredResults({ db }: ActivityDeps, binding: Binding, resumeFormId: string | undefined): Promise<Deferred> {
  const deferred: Deferred = {};
  const formId = resumeFormId ?? binding.pending_form_id;
  if (formId && binding.pending_tool_call_id) {
    const form = resumeFormId ? await db.humanInputForm.findUnique({ where: { id: formId } }) : null;
    deferred[binding.pending_tool_call_id] = form ? deferredResultFromForm(form) : { status: 'unavailable' };
  }
  return deferred;
}

/**
 * One statement (so one transaction and one round trip; it used to be a four-statement transaction): the run request,
 * the version the message ran with (and whether its answer cites), the pending call it closes.
 */
async function storeRunRequest(
  { db }: ActivityDeps,
  r: {
    messageId: string;
    request: CreateRunRequest;
    binding: Binding;
    outputModeration: unknown;
    configVersionId: string | null;
    cites: boolean;
    closesPending: boolean;
  },
): Promise<AgentBackendRun | undefined> {
  const { messageId, request, binding, outputModeration, configVersionId, cites, closesPending } = r;
  const [run] = await db.$queryRaw<AgentBackendRun[]>`
    with run as (
      insert into agent_backend_runs (message_id, request, binding_id, output_moderation, updated_at)
      values (${messageId}::uuid, ${JSON.stringify(request)}::jsonb, ${binding.id}::uuid,
              ${outputModeration ? JSON.stringify(outputModeration) : null}::jsonb, now())
      on conflict (message_id) do update
        set request = excluded.request, binding_id = excluded.binding_id,
            output_moderation = excluded.output_moderation, updated_at = now()
      returning *
    ), version as (
      update messages set agent_config_version_id = ${configVersionId}::uuid,
             metadata = case when ${cites} then metadata || ${JSON.stringify(CITATIONS_MARK)}::jsonb
                             else metadata - 'retriever_resource' end,
             updated_at = now()
       where id = ${messageId}::uuid
         and (agent_config_version_id is distinct from ${configVersionId}::uuid
              or (metadata -> 'retriever_resource' is not null) is distinct from ${cites})
    ), pending as (
      update agent_workspace_bindings
         set pending_form_id = null, pending_tool_call_id = null, pending_message_id = null, updated_at = now()
       where id = ${binding.id}::uuid and ${closesPending}
    )
    select * from run`;
  return run;
}
