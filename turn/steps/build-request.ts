/**
 * buildRunRequest (docs/seeds/000 AgentAppRuntimeRequestBuilder): the layer composition for the agent backend,
 * the retained session snapshot and deferred tool results. The request is stored on AgentBackendRun
 * (not returned): snapshots grow with the conversation and must stay out of workflow history.
 */
import path from 'node:path';
import type { LayerSpec, SessionSnapshot, CreateRunRequest, DeferredToolResult, InvokeFrom } from '../../core/protocol/run.js';
import { signExecutionContext } from '../../core/exec-context.js';
import type { ModelPrice } from '../../core/llm/pricing.js';
import { deferredResultFromForm } from '../../core/human-input.js';
import { resolvePromptMentions } from '../../core/mention-resolver.js';
import { resignFileUrl } from '../../core/uploads.js';
import { whitelistModelSettings, type AgentSoulConfig } from '../../core/soul.js';
import { withProviderTools } from '../../core/tools/providers.js';
import type { ActivityDeps } from '../deps.js';
import { SESSION_CONFIG_CHANGED_MESSAGE, turnFailure } from '../errors.js';
import type { AgentBackendRun } from '../../core/generated/prisma/client.js';
import type { Binding } from './binding.js';
import { placeTurnFiles, type PlacedFile } from './workspace-files.js';
import { outputQuotaLimits, type OutputQuotaLimits } from '../../core/output-quota.js';
import { workspaceUid } from '../../core/workspace-uid.js';
import type { Resolution } from './resolve-config.js';
import type { TurnContext } from './turn-context.js';

export interface BuildInput {
  tenantId: string;
  appId: string;
  agentId: string;
  conversationId: string;
  messageId: string;
  userId: string;
  userFrom: 'end-user' | 'account';
  invokeFrom: InvokeFrom;
  configVersionId: string | null;
  query: string;
  files: { type: 'image' | 'document'; url?: string; name?: string; mime_type?: string }[];
  supportsVision: boolean;
  /** The model's limits and the tenant's prices for it (core/llm/tenant-model.ts), when the deployment knows it. */
  model?: { context_window: number; max_output?: number; prices: ModelPrice };
  /** Signs the execution context: EXECUTION_CONTEXT_SIGNING_KEY (not the inner API key; issue 17 L2). */
  innerApiKey: string;
  /** Lifetime of the signed execution context, ms (EXECUTION_CONTEXT_TTL_MS). */
  contextTtlMs?: number;
  /** The binding's workspace: the runtime layer's directory (only used when the soul enables runtime). */
  workspaceId?: string;
  /** The workspace should exist already (its binding's snapshot holds a runtime layer: an earlier turn entered it). */
  workspaceExpected?: boolean;
  /** The workspace's generation, recorded in its identity marker (agent-backend/workspace/marker.ts). */
  workspaceGeneration?: number;
  /** The turn's files as placed into the workspace (runtime enabled): the model gets these paths, not URLs. */
  workspaceFiles?: PlacedFile[];
  /** What the turn may still attach from `outputs/` (core/output-quota.ts): the shell layer's `output_quota`. */
  outputQuota?: OutputQuotaLimits;
  /** The knowledge layer's dataset names, for `{{#dataset.<id>#}}` mentions (core/mention-resolver.ts). */
  datasetNames?: ReadonlyMap<string, string>;
  /** The request's inputs, for `{{#inputs.<name>#}}` mentions. */
  inputs?: Readonly<Record<string, unknown>>;
}

/** Pure: soul config + turn facts → ordered layer composition (docs/PROTOCOL.md §2 order). */
export function buildComposition(soul: AgentSoulConfig, t: BuildInput): LayerSpec[] {
  const layer = (name: string, config: Record<string, unknown>, deps: string[] = []): LayerSpec => ({
    name,
    type: name,
    deps,
    metadata: {},
    config,
  });
  const nativeImages = t.supportsVision;
  const files = t.files.map((f) => ({ ...f, transfer: f.type === 'image' && nativeImages ? 'native' : 'download' }));
  const downloads = files.filter((f) => f.transfer === 'download');
  // Names and types (issue 31). The chat route accepts only what /v1/parameters offers (documents need the workspace,
  // images a vision model), so a file listed here by link is one the turn kept from an earlier config: said as it is.
  const describe = (f: { type: string; name?: string; mime_type?: string }) =>
    `${f.name ?? 'file'} (${f.type}${f.mime_type ? `, ${f.mime_type}` : ''})`;
  let text =
    downloads.length === 0
      ? t.query
      : `${t.query}\n\nAttached files (links only: this agent has no workspace or tool to open them):\n${downloads.map((f) => `- ${describe(f)}: ${f.url}`).join('\n')}`;
  if (t.workspaceFiles?.length) {
    const typed = t.workspaceFiles.map((f, i) => ({ ...f, type: t.files[i]?.type ?? 'document', mime_type: t.files[i]?.mime_type }));
    const placed = typed.filter((f) => f.path);
    const failed = typed.filter((f) => !f.path);
    text = t.query;
    if (placed.length)
      text += `\n\nAttached files (in your workspace; open them with the shell):\n${placed.map((f) => `- ${f.path} (${f.type}${f.mime_type ? `, ${f.mime_type}` : ''})`).join('\n')}`;
    if (failed.length)
      text += `\n\nAttached files that could not be placed in your workspace:\n${failed.map((f) => `- ${f.name}: ${f.error}`).join('\n')}`;
  }
  const withRuntime = soul.runtime.enabled && Boolean(t.workspaceId);
  const layers: LayerSpec[] = [
    // Mentions resolved against this composition (issue 31): tools by the name the model is offered, datasets by name.
    layer('agent_soul_prompt', {
      system_prompt: resolvePromptMentions(soul, {
        datasetNames: t.datasetNames,
        inputs: t.inputs,
        sys: { query: t.query, user_id: t.userId, conversation_id: t.conversationId, app_id: t.appId, message_id: t.messageId },
      }),
    }),
    layer('agent_app_user_prompt', { text, files: files.filter((f) => f.transfer === 'native') }),
    layer(
      'execution_context',
      signExecutionContext(
        {
          tenant_id: t.tenantId,
          user_id: t.userId,
          user_from: t.userFrom,
          app_id: t.appId,
          conversation_id: t.conversationId,
          message_id: t.messageId,
          agent_id: t.agentId,
          agent_config_version_id: t.configVersionId,
          invoke_from: t.invokeFrom,
          trace_id: t.messageId,
          // The runtime layer's workspace, signed: the backend admits it only for this run (issue 27).
          ...(withRuntime ? { workspace_id: t.workspaceId } : {}),
        },
        t.innerApiKey,
        { ttlMs: t.contextTtlMs },
      ),
    ),
    layer('history', { max_messages: soul.history.max_messages }),
    layer(
      'llm',
      {
        provider: soul.model.provider,
        model: soul.model.model,
        model_settings: whitelistModelSettings(soul.model.model_settings),
        ...contextWindowOf(soul, t.model),
        ...(t.model?.max_output ? { max_output: t.model.max_output } : {}),
        ...(t.model ? { prices: t.model.prices } : {}),
        execution_context: 'execution_context',
      },
      ['execution_context'],
    ),
  ];
  // Provider tools (docs/tools.md): the api makes the calls, scoped by the signed execution context.
  if (soul.tools.plugin.length > 0)
    layers.push(layer('tools', { tools: soul.tools.plugin, execution_context: 'execution_context' }, ['execution_context']));
  layers.push(layer('core_tools', { tools: soul.tools.core }));
  // The workspace, in resource order Runtime → Shell → Config (entered in this order, released in reverse):
  // the shell runs in the runtime, and the config layer lets the sandboxed dify-agent CLI reach the stub.
  if (withRuntime) {
    // expect_existing (issue 31): a workspace that vanished since its last turn fails the run `binding_lost`.
    layers.push(
      layer('runtime', {
        kind: 'local',
        workspace_id: t.workspaceId,
        ...(t.workspaceExpected ? { expect_existing: true } : {}),
        ...(t.workspaceGeneration && t.workspaceGeneration !== 1 ? { generation: t.workspaceGeneration } : {}),
      }),
    );
    if (soul.shell.enabled) {
      const limits = {
        ...(soul.shell.timeout_ms ? { timeout_ms: soul.shell.timeout_ms } : {}),
        ...(soul.shell.max_output_bytes ? { max_output_bytes: soul.shell.max_output_bytes } : {}),
      };
      const quota = t.outputQuota ? { output_quota: t.outputQuota } : {};
      layers.push(layer('shell', { runtime: 'runtime', ...limits, ...quota }, ['runtime']));
      layers.push(layer('config', { execution_context: 'execution_context' }, ['execution_context']));
    }
  }
  // Knowledge (docs/knowledge.md): the backend retrieves for the user's query (as typed, without file notes) before
  // the first model request and appends the passages to the user message.
  if (soul.knowledge.enabled) {
    const k = soul.knowledge;
    const config = { dataset_ids: k.dataset_ids, top_k: k.top_k, score_threshold: k.score_threshold, search_tool: k.search_tool };
    layers.push(layer('knowledge', { ...config, execution_context: 'execution_context', query: t.query }, ['execution_context']));
  }
  if (soul.ask_human.enabled) layers.push(layer('ask_human', { enabled: true }));
  layers.push(layer('output', {}));
  return layers;
}

/** The window the backend fits prompts into: the model's, or the agent config's when smaller. */
function contextWindowOf(soul: AgentSoulConfig, model: BuildInput['model']): { context_window?: number } {
  const windows = [soul.model.context_window, model?.context_window].filter((n): n is number => typeof n === 'number' && n > 0);
  return windows.length ? { context_window: Math.min(...windows) } : {};
}

/** docs/seeds/000 _validate_session_snapshot_layers: topology must match; values may change. */
export function assertSnapshotMatches(layers: LayerSpec[], snapshot: SessionSnapshot | null): void {
  if (!snapshot) return;
  const a = layers.map((l) => l.name);
  const b = snapshot.layers.map((l) => l.name);
  if (a.length !== b.length || a.some((n, i) => n !== b[i])) {
    throw turnFailure('agent_session_configuration_changed', 409, SESSION_CONFIG_CHANGED_MESSAGE);
  }
}

export function createBuildRunRequest(deps: ActivityDeps) {
  const { db, config } = deps;
  return async function buildRunRequest(
    ctx: TurnContext,
    r: Resolution,
    binding: Binding,
    /** Set when this message continues a paused turn: the form whose result resumes the run. */
    resumeFormId?: string,
  ): Promise<{ layers: number; hasSnapshot: boolean; deferredCalls: number; run?: AgentBackendRun }> {
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
    // With a workspace, the turn's files go into it (uploads copied, remote URLs fetched by the pinned fetcher).
    const workspaceFiles =
      soul.runtime.enabled && msg.files.length
        ? await placeTurnFiles(
            { db, config },
            {
              workspaceDir: path.join(config.workspacesDir, binding.workspace_id),
              messageId: msg.id,
              files: msg.files,
              // Isolated commands run as the workspace's own uid: what is placed belongs to it (issue 27).
              owner:
                config.SHELL_ISOLATION === 'on'
                  ? workspaceUid(binding.workspace_id, { base: config.SHELL_UID_BASE, range: config.SHELL_UID_RANGE })
                  : undefined,
            },
          )
        : undefined;
    // The files' names and types, for the prompt (issue 31).
    const uploadIds = msg.files.flatMap((f) => (f.upload_file_id ? [f.upload_file_id] : []));
    const uploads = new Map(
      uploadIds.length
        ? (await db.uploadFile.findMany({ where: { id: { in: uploadIds } }, select: { id: true, name: true, mime_type: true } })).map(
            (u) => [u.id, { name: u.name, mime_type: u.mime_type }],
          )
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
      ...(model ? { model: { context_window: model.context_window, max_output: model.entry?.max_output, prices: model.pricing } } : {}),
      innerApiKey: config.EXECUTION_CONTEXT_SIGNING_KEY,
      contextTtlMs: config.EXECUTION_CONTEXT_TTL_MS,
      workspaceId: binding.workspace_id,
      workspaceExpected: (binding.session_snapshot as SessionSnapshot | null)?.layers.some((l) => l.name === 'runtime') ?? false,
      workspaceGeneration: binding.generation,
      workspaceFiles,
      outputQuota:
        soul.runtime.enabled && soul.shell.enabled
          ? await outputQuotaLimits(db, config, { tenantId: msg.tenant_id, messageId: msg.id })
          : undefined,
    });
    const snapshot = (binding.session_snapshot as SessionSnapshot | null) ?? null;
    assertSnapshotMatches(layers, snapshot);
    // Deferred tool results: the submitted/expired form of this continuation, or — for a new turn after a
    // stop while a form waited — the dangling call closed as `unavailable`.
    const deferred: Record<string, DeferredToolResult> = {};
    const formId = resumeFormId ?? binding.pending_form_id;
    if (formId && binding.pending_tool_call_id) {
      const form = resumeFormId ? await db.humanInputForm.findUnique({ where: { id: formId } }) : null;
      deferred[binding.pending_tool_call_id] = form ? deferredResultFromForm(form) : { status: 'unavailable' };
    }
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
    // One statement (so one transaction and one round trip; it used to be a four-statement transaction): the run
    // request, the version the message ran with, the pending call it closes.
    const closesPending = Object.keys(deferred).length > 0;
    const [run] = await db.$queryRaw<AgentBackendRun[]>`
      with run as (
        insert into agent_backend_runs (message_id, request, binding_id, output_moderation, updated_at)
        values (${msg.id}::uuid, ${JSON.stringify(request)}::jsonb, ${binding.id}::uuid,
                ${outputModeration ? JSON.stringify(outputModeration) : null}::jsonb, now())
        on conflict (message_id) do update
          set request = excluded.request, binding_id = excluded.binding_id,
              output_moderation = excluded.output_moderation, updated_at = now()
        returning *
      ), version as (
        update messages set agent_config_version_id = ${resolved.configVersionId}::uuid, updated_at = now()
         where id = ${msg.id}::uuid and agent_config_version_id is distinct from ${resolved.configVersionId}::uuid
      ), pending as (
        update agent_workspace_bindings
           set pending_form_id = null, pending_tool_call_id = null, pending_message_id = null, updated_at = now()
         where id = ${binding.id}::uuid and ${closesPending}
      )
      select * from run`;
    return { layers: layers.length, hasSnapshot: !!snapshot, deferredCalls: Object.keys(deferred).length, run };
  };
}
