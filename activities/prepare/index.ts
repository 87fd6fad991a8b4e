/**
 * prepareTurn: the short steps before the agent run — resolveConfig, inputGuards (fresh turns only),
 * loadOrCreateBinding, buildRunRequest. Each step is idempotent on its own, so the composite is too. Two callers:
 * - runAgent (turns started with the `prepare-in-run-agent` patch), through `createTurnPreparation`, which hands it
 *   the message and run row it read and wrote, so runAgent does not read them again;
 * - the `prepareTurn` local activity of turns started before that patch (its result is in their histories: only
 *   the guard outcome, never the run request).
 */
import type { AgentBackendRun } from '../../core/generated/prisma/client.js';
import type { Prisma } from '../../core/platform/db.js';
import type { ActivityDeps } from '../deps.js';
import { createLoadOrCreateBinding } from './binding.js';
import { createBuildRunRequest } from './build-request.js';
import { createInputGuards } from './input-guards.js';
import { createResolveConfig } from './resolve-config.js';
import { CITATIONS_MARK } from '../../core/domain/knowledge/citations.js';
import { loadTurnContext, type TurnContext, type TurnContextRead } from './turn-context.js';

export interface PrepareInput {
  messageId: string;
  runGuards: boolean;
  resumeFormId?: string;
}

export type Prepared =
  | { guard: 'moderation' | 'annotation' }
  | {
      guard: null;
      /** The message as the steps left it. */
      msg: TurnContext['msg'];
      /** The run row with its request: as built now, or as an earlier attempt built it. */
      run: AgentBackendRun;
    };

export function createTurnPreparation(deps: ActivityDeps) {
  const resolveConfig = createResolveConfig(deps);
  const inputGuards = createInputGuards(deps);
  const loadOrCreateBinding = createLoadOrCreateBinding(deps);
  const buildRunRequest = createBuildRunRequest(deps);
  return async function prepare(input: PrepareInput, opts: { first?: TurnContextRead } = {}): Promise<Prepared> {
    const t0 = performance.now();
    const ctx = await loadTurnContext(deps.db, input.messageId, opts.first);
    const r = await resolveConfig(ctx);
    const t1 = performance.now();
    if (input.runGuards) {
      const { hit } = await inputGuards(ctx, r.soul, r.resolved.configVersionId);
      if (hit) return { guard: hit };
    }
    const t2 = performance.now();
    const { binding } = await loadOrCreateBinding(ctx, r);
    const t3 = performance.now();
    const built = await buildRunRequest(ctx, r, binding, input.resumeFormId);
    const t4 = performance.now();
    const ms = (a: number, b: number) => Math.round((b - a) * 10) / 10;
    deps.logger.debug(
      {
        message_id: input.messageId,
        ms: { resolve: ms(t0, t1), guards: ms(t1, t2), binding: ms(t2, t3), build: ms(t3, t4), total: ms(t0, t4) },
      },
      'turn prepared',
    );
    const run = built.run ?? ctx.existingRun;
    if (!run) throw new Error(`no run request was built for message ${input.messageId}`);
    // The message as the build left it: its version, and whether its answer cites (citations.ts).
    const metadata = (ctx.msg.metadata ?? {}) as Prisma.JsonObject;
    const { retriever_resource: _mark, ...unmarked } = metadata;
    const marked = built.cites === undefined ? metadata : built.cites ? { ...metadata, ...CITATIONS_MARK } : unmarked;
    return { guard: null, msg: { ...ctx.msg, agent_config_version_id: r.resolved.configVersionId, metadata: marked }, run };
  };
}

/** The `prepareTurn` local activity (histories from before `prepare-in-run-agent`): the guard outcome only. */
export function createPrepareTurn(deps: ActivityDeps) {
  const prepare = createTurnPreparation(deps);
  return async function prepareTurn(input: PrepareInput): Promise<{ guard: null | 'moderation' | 'annotation' }> {
    return { guard: (await prepare(input)).guard };
  };
}
