/**
 * Fail fast on the model section of a soul config (issue 29 item 4): an unknown provider, a model the
 * catalogue does not have (open providers — openai_compatible, ollama — serve any name), a provider with no
 * usable credential for the tenant (neither its own nor the deployment's), or a setting outside the model's
 * bounds (max_tokens above its max output, context_window above its window, tools for a model without tool
 * calls, temperature out of range) is an issue naming the field. core/domain/soul-validation.ts runs it at save,
 * publish and before a turn (soulDbIssues), against the providers this process created
 * (providers/index.ts registers them here); a process that created none skips it.
 */
import type { AgentSoulConfig } from '../soul.js';
import type { SoulIssue } from '../soul-issues.js';
import type { Db } from '../../platform/db.js';
import { OPEN_PROVIDERS } from './catalogue/index.js';
import type { EncryptionKey } from './credentials.js';
import { readStoredCredentials } from './gateway-cache.js';
import type { ModelInfo, ProviderCredentials, ProviderRegistry } from './provider.js';

let active: { registry: ProviderRegistry; encryptionKey?: EncryptionKey } | null = null;

/** The providers this process serves (the last registry created), with the key to read tenants' declarations. */
export function setActiveProviders(registry: ProviderRegistry, encryptionKey?: EncryptionKey): void {
  active = { registry, encryptionKey: encryptionKey ?? active?.encryptionKey ?? pendingKey };
}

export function activeProviders(): ProviderRegistry | null {
  return active?.registry ?? null;
}

/** A key given before any registry (unused otherwise). */
const pendingKey: EncryptionKey | undefined = undefined;

/** Whether the soul offers the model any tool (builtin, plugin, ask_human, knowledge search, shell). */
function offersTools(soul: AgentSoulConfig): boolean {
  return (
    soul.tools.core.length > 0 ||
    soul.tools.plugin.length > 0 ||
    soul.ask_human.enabled ||
    soul.shell.enabled ||
    (soul.knowledge.enabled && soul.knowledge.search_tool)
  );
}

const TEMPERATURE_MAX: Readonly<Record<string, number>> = { anthropic: 1, bedrock: 1 };

/** Providers whose requests carry a thinking budget (anthropic, bedrock: extended thinking; google: thinkingBudget). */
const THINKING_BUDGET_PROVIDERS: ReadonlySet<string> = new Set(['anthropic', 'bedrock', 'google']);
/** Providers whose requests carry a reasoning effort (OpenAI's and Azure's reasoning models). */
const REASONING_EFFORT_PROVIDERS: ReadonlySet<string> = new Set(['openai', 'azure']);
export const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'] as const;
/** Providers whose API takes no stop sequences: OpenAI's Responses API (the AI SDK drops them with a warning). */
const NO_STOP_PROVIDERS: ReadonlySet<string> = new Set(['openai']);
/** Providers whose Anthropic models take a temperature or a top P, not both, and neither while thinking. */
const SAMPLING_ONE_OF_PROVIDERS: ReadonlySet<string> = new Set(['anthropic']);
const NO_SAMPLING_WHILE_THINKING: ReadonlySet<string> = new Set(['anthropic', 'bedrock']);

/**
 * The settings a model takes and their bounds, as the studio's form shows them (GET /model-providers/{p}/models):
 * the same bounds `settingIssues` enforces at save. `null`: the model takes no such setting (temperature off in the
 * catalogue; thinking budget / reasoning effort only on a reasoning model of a provider whose requests carry it).
 */
export function modelParameters(provider: string, model: ModelInfo) {
  const entry = model.entry;
  const reasoning = entry?.reasoning ?? false;
  const maxOutput = entry?.max_output ?? null;
  return {
    temperature: entry?.temperature === false ? null : { min: 0, max: TEMPERATURE_MAX[provider] ?? 2 },
    max_tokens: { min: 1, max: maxOutput },
    // A model that takes no temperature (OpenAI's reasoning models) takes no top P either: the AI SDK drops both.
    top_p: entry?.temperature === false ? null : { min: 0, max: 1 },
    stop_sequences: NO_STOP_PROVIDERS.has(provider) ? null : { max: 8 },
    thinking_budget:
      reasoning && THINKING_BUDGET_PROVIDERS.has(provider)
        ? {
            min: provider === 'anthropic' || provider === 'bedrock' ? 1024 : 1,
            max: maxOutput === null ? null : maxOutput - 1,
            // The settings its requests drop while it thinks: the form disables them then, the save refuses them.
            excludes: NO_SAMPLING_WHILE_THINKING.has(provider) ? ['temperature' as const, 'top_p' as const] : [],
          }
        : null,
    reasoning_effort: reasoning && REASONING_EFFORT_PROVIDERS.has(provider) ? [...REASONING_EFFORTS] : null,
  };
}

/**
 * The bounds a model's settings must keep. `atSave`: the config is being saved (not a stored one checked before a
 * turn or at publish), and what the user asked for is held to what the model declares (`modelParameters`) too.
 */
export function settingIssues(provider: string, model: ModelInfo, soul: AgentSoulConfig, opts: { atSave?: boolean } = {}): SoulIssue[] {
  const issues: SoulIssue[] = [];
  const s = soul.model.model_settings;
  const entry = model.entry;
  const maxOutput = entry?.max_output;
  const at = (field: string, message: string) => issues.push({ path: ['model', 'model_settings', field], message });
  if (s.max_tokens !== undefined) {
    if (typeof s.max_tokens !== 'number' || !Number.isInteger(s.max_tokens) || s.max_tokens < 1)
      at('max_tokens', 'must be a positive integer');
    else if (maxOutput !== undefined && s.max_tokens > maxOutput)
      at('max_tokens', `${s.max_tokens} is above the ${maxOutput} output tokens ${provider}/${model.model} can produce`);
  }
  if (s.temperature !== undefined) {
    const max = TEMPERATURE_MAX[provider] ?? 2;
    if (typeof s.temperature !== 'number' || s.temperature < 0 || s.temperature > max)
      at('temperature', `must be a number from 0 to ${max}`);
  }
  if (s.top_p !== undefined && (typeof s.top_p !== 'number' || s.top_p < 0 || s.top_p > 1)) at('top_p', 'must be a number from 0 to 1');
  // Settings the provider's request would drop without a word (the AI SDK's warnings go nowhere a builder reads):
  // refused here, next to their field, so what is saved is what the model is sent.
  if (entry?.temperature === false) {
    if (s.temperature !== undefined) at('temperature', `${provider}/${model.model} takes no temperature`);
    if (s.top_p !== undefined) at('top_p', `${provider}/${model.model} takes no top P`);
  } else if (SAMPLING_ONE_OF_PROVIDERS.has(provider) && s.temperature !== undefined && s.top_p !== undefined)
    at('top_p', `${provider} takes a temperature or a top P, not both: clear one of them`);
  if (Array.isArray(s.stop_sequences) && s.stop_sequences.length > 0 && NO_STOP_PROVIDERS.has(provider))
    at('stop_sequences', `${provider}'s Responses API takes no stop sequences`);
  for (const k of ['presence_penalty', 'frequency_penalty'] as const) {
    const v = s[k];
    if (v !== undefined && (typeof v !== 'number' || v < -2 || v > 2)) at(k, 'must be a number from -2 to 2');
  }
  // Reasoning settings: only a reasoning model takes them (otherwise they would be dropped without a word), and only
  // the one its provider's request carries: a thinking budget on OpenAI's o3 or a reasoning effort on Claude never
  // reached the model. That part is a save-time refusal only: a stored config holding one ran before (the setting
  // dropped) and keeps running rather than failing its turns after an upgrade.
  const reasoning = entry?.reasoning ?? false;
  const declared = modelParameters(provider, model);
  if (s.thinking_budget !== undefined) {
    const b = s.thinking_budget;
    if (typeof b !== 'number' || !Number.isInteger(b) || b < 1) at('thinking_budget', 'must be a positive integer');
    else if (!reasoning) at('thinking_budget', `${provider}/${model.model} is not a reasoning model: it takes no thinking budget`);
    else if (opts.atSave && declared.thinking_budget === null)
      at(
        'thinking_budget',
        `${provider}/${model.model} takes no thinking budget${declared.reasoning_effort ? ': set its reasoning effort instead' : ''}`,
      );
    else if ((provider === 'anthropic' || provider === 'bedrock') && b < 1024)
      at('thinking_budget', `${provider} needs a thinking budget of at least 1024 tokens`);
    else if (maxOutput !== undefined && b >= maxOutput)
      at('thinking_budget', `${b} is not below the ${maxOutput} output tokens ${provider}/${model.model} can produce`);
    else
      for (const k of declared.thinking_budget?.excludes ?? [])
        if (s[k] !== undefined)
          at(k, `${provider} takes no ${k === 'top_p' ? 'top P' : k} while it thinks: clear it or the thinking budget`);
  }
  if (s.reasoning_effort !== undefined) {
    if (!['minimal', 'low', 'medium', 'high'].includes(String(s.reasoning_effort)))
      at('reasoning_effort', 'must be one of minimal, low, medium, high');
    else if (!reasoning) at('reasoning_effort', `${provider}/${model.model} is not a reasoning model: it takes no reasoning effort`);
    else if (opts.atSave && declared.reasoning_effort === null)
      at(
        'reasoning_effort',
        `${provider}/${model.model} takes no reasoning effort${declared.thinking_budget ? ': set its thinking budget instead' : ''}`,
      );
  }
  if (soul.model.context_window !== undefined && soul.model.context_window > model.context_window) {
    issues.push({
      path: ['model', 'context_window'],
      message: `${soul.model.context_window} is above the ${model.context_window}-token context window of ${provider}/${model.model}`,
    });
  }
  if (!model.supports_tools && offersTools(soul)) {
    issues.push({
      path: ['model', 'model'],
      message: `${provider}/${model.model} does not support tool calls, but the config offers tools (tools, ask_human, shell or knowledge search)`,
    });
  }
  return issues;
}

/** Every problem of the soul's model section for this tenant; empty when it can run. */
export async function modelIssues(
  db: Db,
  tenantId: string,
  soul: AgentSoulConfig,
  registry: ProviderRegistry | null = activeProviders(),
  opts: { atSave?: boolean } = {},
): Promise<SoulIssue[]> {
  if (!registry) return [];
  const { provider: name, model: modelName } = soul.model;
  const provider = registry.get(name);
  if (!provider) {
    const known = registry
      .list()
      .map((p) => p.name)
      .join(', ');
    return [{ path: ['model', 'provider'], message: `unknown model provider '${name}' (this deployment has: ${known})` }];
  }
  let credentials: ProviderCredentials | null = null;
  // One read (none with the process's gateway cache): whether the tenant has a row, and its declarations.
  const stored = await readStoredCredentials(db, tenantId, name);
  const hasRow = stored.encrypted !== null;
  const key = active?.encryptionKey ?? pendingKey;
  if (hasRow && key && OPEN_PROVIDERS.has(name)) {
    try {
      credentials = stored.open(key);
    } catch {
      credentials = null;
    }
  }
  const known = provider.isKnownModel ? provider.isKnownModel(modelName, credentials) : provider.resolveModel(modelName) !== undefined;
  const model = provider.resolveModel(modelName, credentials);
  if (!model || (!known && !OPEN_PROVIDERS.has(name))) {
    const some = provider
      .models()
      .slice(0, 8)
      .map((m) => m.model)
      .join(', ');
    return [
      {
        path: ['model', 'model'],
        message:
          `'${modelName}' is not a ${name} model of the catalogue${some ? ` (for example: ${some})` : ''}; ` +
          'a custom model is declared in MODEL_CATALOGUE_OVERRIDES (docs/models.md)',
      },
    ];
  }
  const issues: SoulIssue[] = [];
  if (!hasRow && !provider.hasSystemCredentials()) {
    issues.push({
      path: ['model', 'provider'],
      message: `'${name}' has no credentials for this workspace and is not hosted by this deployment: add credentials (console /model-providers)`,
    });
  }
  return [...issues, ...settingIssues(name, model, soul, opts)];
}

/**
 * At save and publish only: an explicit request for image uploads on a model that takes no images and no workspace
 * with a shell to receive them (there images are placed as files, docs/seeds/000's fallback: issue 43).
 */
export function imageUploadIssues(
  rawSoul: unknown,
  soul: AgentSoulConfig,
  registry: ProviderRegistry | null = activeProviders(),
): SoulIssue[] {
  const raw = rawSoul as { features?: { file_upload?: { enabled?: unknown; image_enabled?: unknown } } } | null;
  const upload = raw?.features?.file_upload;
  if (!registry || upload?.image_enabled !== true || upload.enabled === false) return [];
  if (soul.runtime.enabled && soul.shell.enabled) return [];
  const model = registry.get(soul.model.provider)?.resolveModel(soul.model.model);
  if (!model || model.supports_vision) return [];
  return [
    {
      path: ['features', 'file_upload', 'image_enabled'],
      message: `${soul.model.provider}/${soul.model.model} takes no images: switch image uploads off, pick a vision model, or enable runtime and shell (images then arrive as workspace files)`,
    },
  ];
}
