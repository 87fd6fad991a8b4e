/**
 * The agent backend's registry endpoints (docs/PROTOCOL.md §2 "Registry"): what modules this deployment's
 * backend can run, and a dry run of the composition planning POST /runs does. Shared by the backend's routes
 * and the api's client, like core/protocol/run.ts.
 */
import { z } from 'zod';

/** One registered module: `available: false` names why compositions using it are refused (`module_unavailable`). */
export const ModuleInfo = z.object({
  name: z.string(),
  capability: z.string(),
  description: z.string(),
  available: z.boolean(),
  unavailable_reason: z.string().nullable(),
  /** JSON Schema (2020-12) of the layer config, as a client sends it. */
  config_schema: z.record(z.string(), z.unknown()),
});
export type ModuleInfo = z.infer<typeof ModuleInfo>;

export const ModulesResponse = z.object({ modules: z.array(ModuleInfo) });
export type ModulesResponse = z.infer<typeof ModulesResponse>;

export const ValidateCompositionResponse = z.object({ ok: z.literal(true) });

/** The error body every backend route answers with (agent-backend/server.ts). */
export const BackendErrorBody = z.object({ code: z.string().min(1), message: z.string(), status: z.number().int() });
export type BackendErrorBody = z.infer<typeof BackendErrorBody>;
