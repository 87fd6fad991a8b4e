/**
 * The model catalogue: what each model can do and what it costs, as data (docs/models.md). The JSON files
 * beside this one are generated from models.dev (`npm run models:refresh`, scripts/models-refresh.ts) except
 * ollama.json, demo.json and openai-compatible.json, which are kept by hand. A deployment adds or corrects
 * entries with MODEL_CATALOGUE_OVERRIDES (JSON text, or `@/path/to/file.json`): a list of
 * `{provider, model, like?, ...fields}` — `like` copies another model of the same provider (an Azure
 * deployment named `prod-4o` `like: "gpt-4o"`, a Bedrock inference profile), the given fields win.
 *
 * Two kinds of provider: *closed* ones (openai, anthropic, google, azure, bedrock, demo) serve only catalogue
 * models; *open* ones (openai_compatible, ollama) serve any model name, with the provider's `defaults` for one
 * nobody declared (text only, tools on). Vision and file kinds in /v1/parameters, the bounds of max_tokens and
 * context_window at save time, and the prices of every call come from here.
 */
import fs from 'node:fs';
import { z } from 'zod';
import anthropic from './anthropic.json' with { type: 'json' };
import azure from './azure.json' with { type: 'json' };
import bedrock from './bedrock.json' with { type: 'json' };
import demo from './demo.json' with { type: 'json' };
import google from './google.json' with { type: 'json' };
import ollama from './ollama.json' with { type: 'json' };
import openaiCompatible from './openai-compatible.json' with { type: 'json' };
import openai from './openai.json' with { type: 'json' };

const Decimal = z.string().regex(/^\d+(\.\d{1,12})?$/, 'a non-negative decimal string, e.g. "2.5"');

export const ModelPrices = z
  .object({
    /** Currency per 1M prompt tokens. */
    input: Decimal,
    /** Currency per 1M completion tokens. */
    output: Decimal,
    /** Currency per 1M prompt tokens read from the provider's prompt cache (default: `input`). */
    cached_input: Decimal.optional(),
    currency: z.string().min(1).default('USD'),
  })
  .strict();
export type ModelPrices = z.output<typeof ModelPrices>;

export const CatalogueEntry = z
  .object({
    model: z.string().min(1).max(200),
    label: z.string().min(1),
    context_window: z.number().int().positive(),
    max_output: z.number().int().positive(),
    vision: z.boolean(),
    documents: z.boolean(),
    tool_calls: z.boolean(),
    reasoning: z.boolean(),
    structured_output: z.boolean(),
    /** Whether the model takes a temperature (reasoning models often do not). */
    temperature: z.boolean().default(true),
    prices: ModelPrices,
    /** The model's stream timeouts, ms, when not the defaults (docs/models.md "Stream timeouts"). */
    timeouts: z
      .object({ first_token_ms: z.number().int().nonnegative().optional(), idle_ms: z.number().int().nonnegative().optional() })
      .strict()
      .optional(),
  })
  .strict();
export type CatalogueEntry = z.output<typeof CatalogueEntry>;

/** How long a call may wait for its first streamed part, and between two parts, ms (0: no limit). */
export interface StreamTimeouts {
  firstTokenMs: number;
  idleMs: number;
}

/**
 * Defaults when an entry names none (docs/models.md "Stream timeouts"): a minute to the first part and 30 s of
 * silence for a chat model; a reasoning model may think for minutes before it streams anything (5 min, 2 min); a
 * local Ollama model may first load into memory (2 min, 1 min).
 */
export const DEFAULT_STREAM_TIMEOUTS: StreamTimeouts = { firstTokenMs: 60_000, idleMs: 30_000 };
export const REASONING_STREAM_TIMEOUTS: StreamTimeouts = { firstTokenMs: 300_000, idleMs: 120_000 };
export const LOCAL_STREAM_TIMEOUTS: StreamTimeouts = { firstTokenMs: 120_000, idleMs: 60_000 };

/** A model's stream timeouts: the deployment's (MODEL_*_TIMEOUT_MS) over the entry's over the defaults. */
export function streamTimeoutsOf(entry: CatalogueModel | undefined, deployment: Partial<StreamTimeouts> = {}): StreamTimeouts {
  const base = entry?.reasoning
    ? REASONING_STREAM_TIMEOUTS
    : entry?.provider === 'ollama'
      ? LOCAL_STREAM_TIMEOUTS
      : DEFAULT_STREAM_TIMEOUTS;
  return {
    firstTokenMs: deployment.firstTokenMs ?? entry?.timeouts?.first_token_ms ?? base.firstTokenMs,
    idleMs: deployment.idleMs ?? entry?.timeouts?.idle_ms ?? base.idleMs,
  };
}

export interface CatalogueModel extends CatalogueEntry {
  provider: string;
  /** Not from the catalogue: declared by the deployment or the tenant, or an open provider's defaults. */
  custom: boolean;
}

const CatalogueFile = z.object({
  provider: z.string(),
  source: z.string(),
  defaults: CatalogueEntry.optional(),
  models: z.array(CatalogueEntry),
});

/** One override or declaration: a full entry, or fields over `like` / the entry of the same name. */
export const ModelDeclaration = CatalogueEntry.partial()
  .extend({ provider: z.string().min(1), model: z.string().min(1).max(200), like: z.string().min(1).optional() })
  .strict();
export type ModelDeclaration = z.output<typeof ModelDeclaration>;

/** A model a tenant's credentials declare for its own endpoint (open providers; prices do not apply: unbilled). */
export const DeclaredModel = ModelDeclaration.omit({ provider: true });

/** Providers that serve any model name (their `defaults` for undeclared ones). */
export const OPEN_PROVIDERS: ReadonlySet<string> = new Set(['openai_compatible', 'ollama']);

const BUILTIN_FILES = [openai, anthropic, google, azure, bedrock, ollama, openaiCompatible, demo];

const OLLAMA_DEFAULTS: CatalogueEntry = {
  model: '*',
  label: 'Custom model',
  context_window: 32_768,
  max_output: 4_096,
  vision: false,
  documents: false,
  tool_calls: true,
  reasoning: false,
  structured_output: true,
  temperature: true,
  prices: { input: '0', output: '0', currency: 'USD' },
};

export class ModelCatalogue {
  private readonly byProvider = new Map<string, Map<string, CatalogueModel>>();
  private readonly defaults = new Map<string, CatalogueEntry>();
  readonly sources = new Map<string, string>();

  constructor(files: unknown[] = BUILTIN_FILES, declarations: ModelDeclaration[] = []) {
    for (const raw of files) {
      const file = CatalogueFile.parse(raw);
      this.sources.set(file.provider, file.source);
      if (file.defaults) this.defaults.set(file.provider, file.defaults);
      const map = this.mapOf(file.provider);
      for (const m of file.models) map.set(m.model, { ...m, provider: file.provider, custom: false });
    }
    if (!this.defaults.has('ollama')) this.defaults.set('ollama', OLLAMA_DEFAULTS);
    for (const d of declarations) this.declare(d);
  }

  private mapOf(provider: string): Map<string, CatalogueModel> {
    let map = this.byProvider.get(provider);
    if (!map) this.byProvider.set(provider, (map = new Map()));
    return map;
  }

  /** Adds or corrects one model (MODEL_CATALOGUE_OVERRIDES); throws naming what is missing. */
  declare(d: ModelDeclaration): CatalogueModel {
    const resolved = resolveDeclaration(this, d);
    this.mapOf(d.provider).set(resolved.model, resolved);
    return resolved;
  }

  /** The catalogue's (or a declared) model; undefined when neither knows it. */
  find(provider: string, model: string): CatalogueModel | undefined {
    return this.byProvider.get(provider)?.get(model);
  }

  /** An open provider's entry for a model nobody declared. */
  fallback(provider: string, model: string): CatalogueModel | undefined {
    const d = OPEN_PROVIDERS.has(provider) ? this.defaults.get(provider) : undefined;
    return d ? { ...d, model, label: model, provider, custom: true } : undefined;
  }

  /** `find`, else an open provider's defaults. */
  resolve(provider: string, model: string): CatalogueModel | undefined {
    return this.find(provider, model) ?? this.fallback(provider, model);
  }

  list(provider: string): CatalogueModel[] {
    return [...(this.byProvider.get(provider)?.values() ?? [])];
  }

  providers(): string[] {
    return [...this.byProvider.keys()];
  }
}

/** A declaration as a full model: over `like`, or over the entry it corrects, or over the provider's defaults. */
export function resolveDeclaration(catalogue: Pick<ModelCatalogue, 'find' | 'fallback'>, d: ModelDeclaration): CatalogueModel {
  const { provider, like, ...fields } = d;
  const base = like ? catalogue.find(provider, like) : (catalogue.find(provider, d.model) ?? catalogue.fallback(provider, d.model));
  if (like && !base) throw new Error(`model ${provider}/${d.model}: like '${like}' is not a ${provider} model of the catalogue`);
  const { provider: _p, custom: _c, ...baseEntry } = base ?? ({} as Partial<CatalogueModel>);
  const label = like || !base ? { label: d.model } : {};
  const merged = { ...baseEntry, ...label, ...stripUndefined(fields) };
  const r = CatalogueEntry.safeParse(merged);
  if (!r.success) {
    throw new Error(
      `model ${provider}/${d.model}: ${r.error.issues.map((i) => `${i.path.join('.') || 'entry'}: ${i.message}`).join('; ')}`,
    );
  }
  return { ...r.data, provider, custom: like ? true : (base?.custom ?? true) };
}

function stripUndefined<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** MODEL_CATALOGUE_OVERRIDES: JSON text, or `@<path>` of a JSON file; a list of declarations. */
export function parseCatalogueOverrides(value: string | undefined): ModelDeclaration[] {
  if (!value?.trim()) return [];
  const text = value.trim().startsWith('@') ? fs.readFileSync(value.trim().slice(1), 'utf8') : value;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`MODEL_CATALOGUE_OVERRIDES: not JSON (${(err as Error).message})`);
  }
  const r = z.array(ModelDeclaration).safeParse(raw);
  if (!r.success) {
    throw new Error(`MODEL_CATALOGUE_OVERRIDES: ${r.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`).join('; ')}`);
  }
  return r.data;
}

/** The catalogue as shipped (no overrides). */
export const BUILTIN_CATALOGUE = new ModelCatalogue();

/** The built-in catalogue plus the deployment's overrides. */
export function loadCatalogue(overrides?: string): ModelCatalogue {
  const declared = parseCatalogueOverrides(overrides);
  return declared.length ? new ModelCatalogue(BUILTIN_FILES, declared) : BUILTIN_CATALOGUE;
}
