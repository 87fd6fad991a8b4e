/**
 * The layer composition a soul config asks for (docs/PROTOCOL.md §2 order), pure: soul config + turn facts → layers.
 * A turn sends it to the agent backend (activities/prepare/build-request.ts); the console plans it to validate a config
 * (core/domain/soul-validation.ts) and shows it (api/console/agent.ts).
 */
import type { LayerSpec, InvokeFrom } from '../protocol/run.js';
import { signExecutionContext } from '../protocol/exec-context.js';
import type { ModelPrice } from './llm/pricing.js';
import { resolvePromptMentions } from './mention-resolver.js';
import { whitelistModelSettings, type AgentSoulConfig } from './soul.js';
import type { OutputQuotaLimits } from './output-quota.js';
import type { PromptMessage } from '../protocol/inner-llm.js';

export interface PlacedFile {
  /** Relative to the workspace. */
  path: string | null;
  name: string;
  error?: string;
}

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
  /** The model's limits and the tenant's prices for it (core/domain/llm/tenant-model.ts), when the deployment knows it. */
  model?: { context_window: number; max_output?: number; prices: ModelPrice };
  /** Signs the execution context: EXECUTION_CONTEXT_SIGNING_KEY (not the inner API key; issue 17 L2). */
  innerApiKey: string;
  /** Lifetime of the signed execution context, ms (EXECUTION_CONTEXT_TTL_MS). */
  contextTtlMs?: number;
  /** The binding's workspace: the runtime layer's directory (only used when the soul enables runtime). */
  workspaceId?: string;
  /** The workspace should exist already (its binding's snapshot holds a runtime layer: an earlier turn entered it). */
  workspaceExpected?: boolean;
  /** The workspace's generation, recorded in its identity marker (core/domain/workspace-marker.ts). */
  workspaceGeneration?: number;
  /** The turn's files as placed into the workspace (runtime enabled): the model gets these paths, not URLs. */
  workspaceFiles?: PlacedFile[];
  /** What the turn may still attach from `outputs/` (core/domain/output-quota.ts): the shell layer's `output_quota`. */
  outputQuota?: OutputQuotaLimits;
  /** The knowledge layer's dataset names, for `{{#dataset.<id>#}}` mentions (core/domain/mention-resolver.ts). */
  datasetNames?: ReadonlyMap<string, string>;
  /** The request's inputs, for `{{#inputs.<name>#}}` mentions. */
  inputs?: Readonly<Record<string, unknown>>;
  /**
   * A lost workspace's replacement binding (activities/prepare/lost-history.ts): the history its first run starts from,
   * and the note appended to the turn's user message.
   */
  recoveredHistory?: { messages: PromptMessage[]; note: string };
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
    const typed = t.workspaceFiles.map((f, i) => ({
      ...f,
      type: t.files[i]?.type ?? 'document',
      mime_type: t.files[i]?.mime_type,
      shown: files[i]?.transfer === 'native',
    }));
    const placed = typed.filter((f) => f.path);
    const failed = typed.filter((f) => !f.path);
    // An image the model is not shown (a text-only model: seed 000's fallback) is said to be one, so it works on the file.
    const unseen = (f: (typeof typed)[number]) =>
      f.type === 'image' && !f.shown ? '; your model cannot see images, so work with the file through the shell' : '';
    text = t.query;
    if (placed.length)
      text += `\n\nAttached files (in your workspace; open them with the shell):\n${placed.map((f) => `- ${f.path} (${f.type}${f.mime_type ? `, ${f.mime_type}` : ''}${unseen(f)})`).join('\n')}`;
    if (failed.length)
      text += `\n\nAttached files that could not be placed in your workspace:\n${failed.map((f) => `- ${f.name}: ${f.error}`).join('\n')}`;
  }
  if (t.recoveredHistory) text += `\n\n${t.recoveredHistory.note}`;
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
    layer('history', {
      max_messages: soul.history.max_messages,
      ...(t.recoveredHistory?.messages.length ? { initial_messages: t.recoveredHistory.messages } : {}),
    }),
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
export function contextWindowOf(soul: AgentSoulConfig, model: BuildInput['model']): { context_window?: number } {
  const windows = [soul.model.context_window, model?.context_window].filter((n): n is number => typeof n === 'number' && n > 0);
  return windows.length ? { context_window: Math.min(...windows) } : {};
}
