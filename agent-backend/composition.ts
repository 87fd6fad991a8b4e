/**
 * Run request validation (all before any I/O) and per-run layer instantiation.
 *
 * Checks: the request schema (unknown fields named), unique layer names, registered and available
 * module types, deps and config references pointing at existing layers of the right module, each
 * layer's config against its module schema, capability cardinality (one model; at most one history,
 * user prompt, output), unique tool names, and a session snapshot whose ordered layer names equal the
 * composition's and whose states match the modules' state schemas.
 */
import { z } from 'zod';
import type { ErrorCode } from '../core/protocol/error-codes.js';
import { CreateRunRequest, type CreateRunRequestParsed, type LayerSpec } from '../core/protocol/run.js';
import { formatZodError, HttpError } from './errors.js';
import type { ModuleRegistry } from './modules/registry.js';
import { noPluginTools, type AnyModule, type LayerInstance, type RunServices } from './modules/types.js';

export interface RunLimits {
  maxModelRequests: number;
  maxToolCalls: number;
  maxWallClockMs: number;
}

/** `metadata.limits` may lower the deployment limits for one run (tests, cautious callers). */
const LimitsOverride = z
  .object({
    max_model_requests: z.number().int().positive().optional(),
    max_tool_calls: z.number().int().nonnegative().optional(),
    max_wall_clock_ms: z.number().int().positive().optional(),
  })
  .strict();

export interface PlannedLayer {
  spec: LayerSpec;
  module: AnyModule;
  config: Readonly<Record<string, unknown>>;
  state: unknown;
}

export interface RunPlan {
  request: CreateRunRequestParsed;
  layers: PlannedLayer[];
  limits: RunLimits;
}

const invalid = (message: string, code: ErrorCode = 'invalid_request') => new HttpError(400, code, message);
const snapshotError = (message: string, code: ErrorCode) => new HttpError(422, code, message);

export function planRun(body: unknown, registry: ModuleRegistry, defaults: RunLimits): RunPlan {
  const parsed = CreateRunRequest.safeParse(body);
  if (!parsed.success) throw invalid(formatZodError(parsed.error));
  const request = parsed.data;
  const specs = request.composition.layers;

  const byName = new Map<string, LayerSpec>();
  for (const spec of specs) {
    if (byName.has(spec.name)) throw invalid(`duplicate layer name '${spec.name}'`);
    byName.set(spec.name, spec);
  }

  checkResourceOrder(specs);

  const layers: PlannedLayer[] = [];
  for (const spec of specs) {
    const module = registry.get(spec.type);
    if (!module) throw invalid(`layer '${spec.name}': unknown module type '${spec.type}'`, 'unknown_module');
    if (module.unavailable) throw invalid(`layer '${spec.name}': ${module.unavailable}`, 'module_unavailable');
    for (const dep of spec.deps) {
      if (dep === spec.name || !byName.has(dep))
        throw invalid(`layer '${spec.name}': dependency '${dep}' is not a layer of this composition`);
    }
    const cfg = module.configSchema.safeParse(spec.config);
    if (!cfg.success) throw invalid(formatZodError(cfg.error, `layer '${spec.name}' config`));
    for (const ref of module.references?.(cfg.data) ?? []) {
      const target = byName.get(ref.layer);
      if (!target) throw invalid(`layer '${spec.name}': ${ref.field} refers to '${ref.layer}', which is not a layer of this composition`);
      if (!ref.types.includes(target.type)) {
        throw invalid(
          `layer '${spec.name}': ${ref.field} refers to '${ref.layer}' of type '${target.type}', expected ${ref.types.join(' or ')}`,
        );
      }
    }
    layers.push({ spec, module, config: deepFreeze(cfg.data) as Readonly<Record<string, unknown>>, state: module.initialState(cfg.data) });
  }

  const count = (kind: string) => layers.filter((l) => l.module.capability === kind).length;
  if (count('model') !== 1) throw invalid(`the composition needs exactly one model layer (llm), found ${count('model')}`);
  for (const kind of ['history', 'user_prompt', 'output']) {
    if (count(kind) > 1) throw invalid(`the composition may have at most one ${kind} layer, found ${count(kind)}`);
  }

  // Tool names must be unique across toolsets. Creating instances is pure (resources come on enter).
  const seen = new Map<string, string>();
  for (const l of layers.filter((x) => x.module.capability === 'toolset')) {
    const inst = l.module.create({ name: l.spec.name, config: l.config, state: l.state, services: dryServices });
    if (inst.capability.kind !== 'toolset') continue;
    for (const t of inst.capability.tools()) {
      const other = seen.get(t.name);
      if (other) throw invalid(`tool name '${t.name}' is offered by both layer '${other}' and layer '${l.spec.name}'`);
      seen.set(t.name, l.spec.name);
    }
  }

  const snapshot = request.session_snapshot;
  if (snapshot) {
    const want = specs.map((s) => s.name);
    const got = snapshot.layers.map((l) => l.name);
    if (want.length !== got.length || want.some((n, i) => n !== got[i])) {
      throw snapshotError(
        `session_snapshot layers [${got.join(', ')}] do not match the composition layers [${want.join(', ')}]; ` +
          'start a new session when the composition changes',
        'session_snapshot_mismatch',
      );
    }
    snapshot.layers.forEach((entry, i) => {
      const st = layers[i].module.stateSchema.safeParse(entry.runtime_state);
      if (!st.success)
        throw snapshotError(formatZodError(st.error, `session_snapshot layer '${entry.name}' runtime_state`), 'invalid_session_snapshot');
      layers[i].state = st.data;
    });
  } else if (request.deferred_tool_results) {
    throw invalid('deferred_tool_results needs the session_snapshot of the run that deferred the call');
  }

  const limitsParsed = LimitsOverride.safeParse(request.metadata.limits ?? {});
  if (!limitsParsed.success) throw invalid(formatZodError(limitsParsed.error, 'metadata.limits'));
  const o = limitsParsed.data;
  const limits: RunLimits = {
    maxModelRequests: Math.min(defaults.maxModelRequests, o.max_model_requests ?? Infinity),
    maxToolCalls: Math.min(defaults.maxToolCalls, o.max_tool_calls ?? Infinity),
    maxWallClockMs: Math.min(defaults.maxWallClockMs, o.max_wall_clock_ms ?? Infinity),
  };

  return { request, layers, limits };
}

/** The resource scopes of seed 004, outermost first: layers enter in composition order and are released in reverse. */
const RESOURCE_ORDER: readonly string[] = ['runtime', 'shell', 'config'];

/**
 * Runtime → Shell → Config (docs/seeds/004 "Native capability ordering preserves Runtime → Shell → Config resource
 * scopes"): a shell entered before its runtime, or a config scope outside the shell, would release in the wrong
 * order. Checked on the module types, before anything else about them (a refusal that names the order, not
 * whatever the misplaced layer lacks). Only the relative order of the resource layers present matters.
 */
function checkResourceOrder(specs: readonly LayerSpec[]): void {
  let last: LayerSpec | undefined;
  for (const spec of specs) {
    const rank = RESOURCE_ORDER.indexOf(spec.type);
    if (rank === -1) continue;
    if (last && RESOURCE_ORDER.indexOf(last.type) > rank)
      throw invalid(
        `layer '${spec.name}' (${spec.type}) comes after layer '${last.name}' (${last.type}): resource layers must be ` +
          `in Runtime → Shell → Config order (entered in composition order, released in reverse)`,
        'invalid_layer_order',
      );
    last = spec;
  }
}

/** Fresh instances for one run, each with its own copy of the state. */
export function instantiate(plan: RunPlan, services: RunServices): LayerInstance[] {
  return plan.layers.map((l) => l.module.create({ name: l.spec.name, config: l.config, state: structuredClone(l.state), services }));
}

const dryServices: RunServices = {
  runId: 'validation',
  logger: undefined as unknown as RunServices['logger'],
  toolResolver: noPluginTools,
  resources: {
    acquire: () => {
      throw new Error('no resources during validation');
    },
    get: () => undefined,
  },
};

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}
