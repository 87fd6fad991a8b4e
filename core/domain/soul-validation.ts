/**
 * Is this soul config runnable here? (issue 14 "fail fast"). Three layers of checks, each naming the field:
 * 1. the schema (core/domain/soul.ts: builtin names, tool name scheme, knowledge without datasets, shell without runtime);
 * 2. what needs the database: the model (core/domain/llm/model-check.ts: provider, catalogue, credentials, bounds; at save
 *    also image uploads on a text-only model), the datasets (core/domain/knowledge/validate.ts) and tool providers
 *    (core/domain/tools/validate.ts) exist in the tenant;
 * 3. the agent backend's registry: the composition the turn would send (activities/prepare/build-request.ts
 *    buildComposition, with placeholder ids) through POST /compositions/validate, which plans it exactly as
 *    POST /runs does — a module this deployment cannot run (runtime/shell without SHELLCTL_AUTH_TOKEN), a layer
 *    config the module refuses, a tool name offered twice.
 * The console runs all three when a config is saved or published; a turn runs 1 and 2 (activities/prepare/resolve-config.ts)
 * and leaves 3 to POST /runs itself, whose 4xx now fails the turn at once (activities/backend-refusal.ts).
 */
import crypto from 'node:crypto';
import type { z } from 'zod';
import type { AgentBackendClient } from '../protocol/backend-client.js';
import type { Db } from '../platform/db.js';
import { checkKnowledgeConfig } from './knowledge/validate.js';
import type { Logger } from '../platform/logger.js';
import type { BackendErrorBody } from '../protocol/registry.js';
import type { CreateRunRequest } from '../protocol/run.js';
import { AgentSoulConfig } from './soul.js';
import { formatSoulPath, type SoulIssue } from './soul-issues.js';
import { checkToolRefs } from './tools/validate.js';
import { imageUploadIssues, modelIssues } from './llm/model-check.js';
import { buildComposition } from './soul-composition.js';

export interface SoulValidationDeps {
  db: Db;
  /** The agent backend's registry; absent, only the api-side checks run. */
  backend?: Pick<AgentBackendClient, 'validateComposition'>;
  logger?: Logger;
}

export interface SoulValidationInput {
  tenantId: string;
  /** The config as stored or sent (unparsed). */
  soul: unknown;
  /** Real ids where the caller has them; placeholders otherwise (the composition's shape does not depend on them). */
  appId?: string;
  agentId?: string;
  /**
   * The config comes from storage (a draft at merge or publish): its defaults were filled in when it was saved, so
   * a default reads as an explicit request. Checks of what the user asked for (image uploads on a text-only model)
   * ran at that save and are skipped here.
   */
  stored?: boolean;
}

/** Every problem found, in check order; empty when the config can run. Schema problems stop the later checks. */
export async function validateSoul(deps: SoulValidationDeps, input: SoulValidationInput): Promise<SoulIssue[]> {
  const parsed = parseSoul(input.soul);
  if (!parsed.soul) return parsed.issues;
  const [db, backend] = await Promise.all([
    soulDbIssues(deps.db, input.tenantId, parsed.soul, { atSave: !input.stored }),
    deps.backend ? backendIssues(deps, parsed.soul, input) : Promise.resolve([]),
  ]);
  return [...(input.stored ? [] : imageUploadIssues(input.soul, parsed.soul)), ...db, ...backend];
}

/** One line naming each field: `tools.core[0]: …; knowledge.dataset_ids: …`. */
export function describeSoulIssues(issues: SoulIssue[]): string {
  return issues.map((i) => (i.path.length ? `${formatSoulPath(i.path)}: ${i.message}` : i.message)).join('; ');
}

/** The schema check: the parsed config, or its issues with the paths the console names. */
export function parseSoul(raw: unknown): { soul: AgentSoulConfig; issues: [] } | { soul: null; issues: SoulIssue[] } {
  const r = AgentSoulConfig.safeParse(raw);
  if (r.success) return { soul: r.data, issues: [] };
  return { soul: null, issues: r.error.issues.map((i) => zodIssue(i, raw)) };
}

/**
 * The checks that need the database (the model and its credentials, datasets, tool providers), side by side.
 * `atSave`: the save-time model checks too (core/domain/llm/model-check.ts settingIssues).
 */
export async function soulDbIssues(db: Db, tenantId: string, soul: AgentSoulConfig, opts: { atSave?: boolean } = {}): Promise<SoulIssue[]> {
  const [model, knowledge, tools] = await Promise.all([
    modelIssues(db, tenantId, soul, undefined, opts),
    checkKnowledgeConfig(db, tenantId, soul),
    checkToolRefs(db, tenantId, soul),
  ]);
  return [...model, ...knowledge, ...tools];
}

function zodIssue(issue: z.core.$ZodIssue, raw: unknown): SoulIssue {
  const path = issue.path.map((p) => (typeof p === 'number' ? p : String(p)));
  // An enum or format miss says what was expected; the value given makes the message stand alone.
  const given = issue.code === 'invalid_value' || issue.code === 'invalid_format' ? valueAt(raw, path) : undefined;
  const shown = typeof given === 'string' && given.length <= 80 ? ` (got ${JSON.stringify(given)})` : '';
  return { path, message: `${issue.message}${shown}` };
}

function valueAt(raw: unknown, path: (string | number)[]): unknown {
  let cur = raw;
  for (const p of path) {
    if (!cur || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[p];
  }
  return cur;
}

/** Composition layer → the soul field it comes from (activities/prepare/build-request.ts buildComposition). */
const LAYER_FIELDS: Readonly<Record<string, (string | number)[]>> = {
  agent_soul_prompt: ['prompt'],
  history: ['history'],
  llm: ['model'],
  tools: ['tools', 'plugin'],
  core_tools: ['tools', 'core'],
  runtime: ['runtime'],
  shell: ['shell'],
  config: ['shell'],
  knowledge: ['knowledge'],
  ask_human: ['ask_human'],
};

/** The backend's refusal as a soul issue: the first layer it names gives the field. */
export function issueFromBackendError(error: Pick<BackendErrorBody, 'code' | 'message'>): SoulIssue {
  const layer = /layer '([^']+)'/.exec(error.message)?.[1];
  const path = layer && Object.hasOwn(LAYER_FIELDS, layer) ? [...LAYER_FIELDS[layer]!] : [];
  const message = error.message.replace(/^layer '[^']+': /, '');
  return { path, message: `${message} (agent backend: ${error.code})` };
}

/**
 * The backend's verdict on the composition this soul builds. A backend that cannot answer (down, 5xx, or
 * another implementation without the route) is not a verdict: logged and skipped, since the turn's POST /runs
 * still refuses such a config within a second.
 */
async function backendIssues(deps: SoulValidationDeps, soul: AgentSoulConfig, input: SoulValidationInput): Promise<SoulIssue[]> {
  try {
    const verdict = await deps.backend!.validateComposition(placeholderRequest(soul, input), AbortSignal.timeout(5_000));
    return verdict.ok ? [] : [issueFromBackendError(verdict.error)];
  } catch (err) {
    deps.logger?.warn({ err: (err as Error).message }, 'soul validation: the agent backend could not check the composition; skipped');
    return [];
  }
}

/** The run request a turn of this soul would send, with placeholder ids (their values are not validated). */
function placeholderRequest(soul: AgentSoulConfig, input: SoulValidationInput): CreateRunRequest {
  const placeholder = () => crypto.randomUUID();
  const layers = buildComposition(soul, {
    tenantId: input.tenantId,
    appId: input.appId ?? placeholder(),
    agentId: input.agentId ?? placeholder(),
    conversationId: placeholder(),
    messageId: placeholder(),
    userId: 'soul-validation',
    userFrom: 'account',
    invokeFrom: 'debugger',
    configVersionId: null,
    query: 'soul validation',
    files: [],
    supportsVision: false,
    // Not a real signature: nothing is run, and the backend checks execution contexts only when they are used.
    innerApiKey: 'soul-validation',
    workspaceId: placeholder(),
  });
  return { composition: { schema_version: 1, layers }, purpose: 'agent_app', session_snapshot: null };
}
