/**
 * The registry endpoints (docs/PROTOCOL.md §2 "Registry"), behind the same backend token as /runs:
 * - GET /modules: every registered module with its capability, availability (and why not) and config schema;
 * - POST /compositions/validate: the planning POST /runs does (agent-backend/composition.ts planRun), with no
 *   I/O and no run: 200 {ok: true}, or the 400/422 POST /runs would answer. The api checks soul configs with it
 *   when they are saved (core/domain/soul-validation.ts), so a config the backend cannot run is refused at the console.
 */
import express, { type Router } from 'express';
import { z } from 'zod';
import type { ModuleInfo, ModulesResponse } from '../../core/protocol/registry.js';
import { planRun, type RunLimits } from '../composition.js';
import type { ModuleRegistry } from '../modules/registry.js';
import type { AnyModule } from '../modules/types.js';

export function registryRoutes(deps: { registry: ModuleRegistry; limits: RunLimits }): Router {
  const router = express.Router();
  // Modules are fixed for the process's life (availability is decided at start), so the answer is too.
  let modules: ModulesResponse | null = null;

  router.get('/modules', (_req, res) => {
    modules ??= { modules: [...deps.registry.values()].map(moduleInfo) };
    res.json(modules);
  });

  router.post('/compositions/validate', (req, res) => {
    planRun(req.body ?? {}, deps.registry, deps.limits);
    res.json({ ok: true });
  });

  return router;
}

function moduleInfo(m: AnyModule): ModuleInfo {
  return {
    name: m.name,
    capability: m.capability,
    description: m.description,
    available: !m.unavailable,
    unavailable_reason: m.unavailable ?? null,
    config_schema: configJsonSchema(m.configSchema),
  };
}

/** The config as a client writes it (`io: input`: defaulted fields optional); a part JSON Schema cannot say is `{}`. */
function configJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
}
