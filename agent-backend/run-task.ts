/**
 * One run from `run_started` to its single terminal event: enter the layers (acquiring resources),
 * run the agent loop, write state back, exit every entered layer and release resources in `finally`
 * (also on failure and cancellation), build the session snapshot, and classify the outcome.
 */
import type { Logger } from '../core/platform/logger.js';
import type { ExecutionContextLayerConfig, SessionSnapshot, Usage } from '../core/protocol/run.js';
import { runAgentLoop, type LoopResult, type LoopState } from './agent-loop.js';
import { instantiate, type RunPlan } from './composition.js';
import { abortCause, ModelCallError, RunLimitExceededError, RunRefusedError } from './errors.js';
import type { RunEmitter } from './events.js';
import type { ModelCaller } from './model/inner-llm-model.js';
import type { LayerInstance, PluginToolResolver, RunResources } from './modules/types.js';
import { UsageMeter } from './usage.js';

export interface RunTaskInput {
  runId: string;
  plan: RunPlan;
  emitter: RunEmitter;
  signal: AbortSignal;
  modelCaller: ModelCaller;
  toolResolver: PluginToolResolver;
  logger: Logger;
}

/** Leases acquired by modules during a run, released in reverse order when the run ends. */
class ResourceScope implements RunResources {
  private readonly leases: Array<{ key: string; value: unknown; release: () => Promise<void> | void }> = [];
  acquire<T>(key: string, value: T, release: () => Promise<void> | void): T {
    this.leases.push({ key, value, release });
    return value;
  }
  get<T>(key: string): T | undefined {
    return this.leases.find((l) => l.key === key)?.value as T | undefined;
  }
  async releaseAll(logger: Logger): Promise<boolean> {
    let ok = true;
    while (this.leases.length) {
      const lease = this.leases.pop()!;
      try {
        await lease.release();
      } catch (err) {
        ok = false;
        logger.error({ err, resource: lease.key }, 'agent backend: releasing a resource failed');
      }
    }
    return ok;
  }
}

/** What the run's layers did: entered and exited (cleanly or not), and the loop's result or failure. */
interface LayersOutcome {
  instances: LayerInstance[];
  result: LoopResult | undefined;
  failure: unknown;
  exitedCleanly: boolean;
}

/**
 * A run in two phases: its layers entered, the loop run and the layers exited (runLayers), then one terminal event
 * published from what happened (the run's abort cause first, then its failure).
 */
export async function executeRun(input: RunTaskInput): Promise<void> {
  const { plan, emitter, signal, logger } = input;
  const usage = new UsageMeter();
  const state: LoopState = { messages: [], partialText: '', lastText: '', nextPartIndex: 0 };
  const { instances, result, failure, exitedCleanly } = await runLayers(input, usage, state);

  const cause = abortCause(signal);
  if (cause?.kind === 'abandon') {
    emitter.detach();
    return;
  }
  const snapshot = exitedCleanly ? buildSnapshot(plan, instances, logger) : null;
  const u: Usage = usage.snapshot();
  // Partial output: the interrupted response's text, else the latest complete one.
  const output = state.partialText || state.lastText;

  if (!failure && result) {
    if (!snapshot) {
      await emitter.terminal(
        'run_failed',
        {
          error: 'the run finished but its layers did not exit cleanly',
          reason: 'layer_exit_failed',
          session_snapshot: null,
          usage: u,
          output,
        },
        { status: 'failed', error: 'the run finished but its layers did not exit cleanly' },
      );
      return;
    }
    const finalOutput = finalize(instances, result.output);
    const data =
      result.kind === 'deferred'
        ? { session_snapshot: snapshot, usage: u, deferred_tool_call: result.call, output: finalOutput }
        : { session_snapshot: snapshot, usage: u, output: finalOutput };
    await emitter.terminal('run_succeeded', data, { status: 'succeeded' });
    return;
  }

  if (cause?.kind === 'cancel') {
    await emitter.terminal(
      'run_cancelled',
      { reason: cause.reason ?? null, message: cause.message ?? null, session_snapshot: snapshot, usage: u, output },
      { status: 'cancelled' },
    );
    return;
  }
  const { error, reason, errorType } = failureOf(cause, failure, input);
  await emitter.terminal(
    'run_failed',
    { error, error_type: errorType, reason, session_snapshot: snapshot, usage: u, output },
    { status: 'failed', error, error_type: errorType },
  );
}

/** Enters every layer, runs the loop, then writes the history back and exits the layers and resources in reverse. */
async function runLayers(input: RunTaskInput, usage: UsageMeter, state: LoopState): Promise<LayersOutcome> {
  const { runId, plan, emitter, signal, logger } = input;
  const resources = new ResourceScope();
  let instances: LayerInstance[] = [];
  const entered: LayerInstance[] = [];
  let result: LoopResult | undefined;
  let failure: unknown;
  let exitedCleanly = false;

  try {
    await emitter.event('run_started', {});
    const executionContext = (layer: string) => {
      const l = plan.layers.find((x) => x.spec.name === layer && x.module.capability === 'execution_context');
      return l ? (l.config as unknown as ExecutionContextLayerConfig) : null;
    };
    instances = instantiate(plan, { runId, logger, toolResolver: input.toolResolver, resources, executionContext, signal });
    for (const layer of instances) {
      await layer.enter?.();
      entered.push(layer);
    }
    result = await runAgentLoop({
      runId,
      request: plan.request,
      instances,
      modelCaller: input.modelCaller,
      emitter,
      signal,
      limits: plan.limits,
      usage,
      state,
      logger,
    });
  } catch (err) {
    failure = err;
  } finally {
    // Explicit state write-back: the conversation, plus the interrupted response's text if any.
    const history = instances.find((i) => i.capability.kind === 'history');
    if (history?.capability.kind === 'history' && entered.length === instances.length && state.messages.length) {
      const messages = state.partialText ? [...state.messages, { role: 'assistant' as const, content: state.partialText }] : state.messages;
      history.capability.save(messages);
    }
    exitedCleanly = entered.length === instances.length && instances.length > 0;
    for (const layer of [...entered].reverse()) {
      try {
        await layer.exit?.();
      } catch (err) {
        exitedCleanly = false;
        logger.error({ err, runId, layer: layer.name }, 'agent backend: layer exit failed');
      }
    }
    if (!(await resources.releaseAll(logger))) exitedCleanly = false;
  }
  return { instances, result, failure, exitedCleanly };
}

/** A failed run's error, reason and Dify error type: what stopped it (timeout, shutdown, the store), else what it threw. */
function failureOf(
  cause: ReturnType<typeof abortCause>,
  failure: unknown,
  { runId, logger }: RunTaskInput,
): { error: string; reason: string | null; errorType: string | null } {
  if (cause?.kind === 'store_failed') {
    // The emitter turns this terminal into its own run_failed (it knows what could not be stored).
    return { error: 'the run could not store its events', reason: cause.reason, errorType: null };
  }
  if (cause?.kind === 'timeout') {
    return { error: `the run exceeded its wall-clock limit of ${cause.limitMs} ms`, reason: 'run_timeout', errorType: null };
  }
  if (cause?.kind === 'shutdown') {
    return { error: 'the agent backend shut down while the run was in progress', reason: 'backend_restarted', errorType: null };
  }
  if (failure instanceof RunLimitExceededError) return { error: failure.message, reason: null, errorType: 'agent_run_limit_exceeded' };
  if (failure instanceof RunRefusedError) return { error: failure.message, reason: failure.reason, errorType: failure.errorType };
  // The gateway's actionable code when it sent one (provider_auth_failed, …), else the Dify kind.
  if (failure instanceof ModelCallError) return { error: failure.message, reason: failure.code ?? failure.errorType, errorType: null };
  logger.error({ err: failure, runId }, 'agent backend: run failed unexpectedly');
  return { error: (failure as Error)?.message ?? String(failure), reason: 'internal_error', errorType: null };
}

function finalize(instances: LayerInstance[], text: string): string {
  const out = instances.find((i) => i.capability.kind === 'output');
  return out?.capability.kind === 'output' ? out.capability.finalize(text) : text;
}

/** One entry per composition layer, in order; states validated by their module schemas. */
function buildSnapshot(plan: RunPlan, instances: LayerInstance[], logger: Logger): SessionSnapshot | null {
  const lifecycle = plan.request.on_exit.default === 'delete' ? 'closed' : 'suspended';
  const layers: SessionSnapshot['layers'] = [];
  for (let i = 0; i < instances.length; i++) {
    const parsed = plan.layers[i].module.stateSchema.safeParse(instances[i].state);
    if (!parsed.success) {
      logger.error({ layer: instances[i].name, issues: parsed.error.issues }, 'agent backend: layer state does not match its schema');
      return null;
    }
    layers.push({ name: instances[i].name, lifecycle_state: lifecycle, runtime_state: parsed.data as Record<string, unknown> });
  }
  return { schema_version: 1, layers };
}
