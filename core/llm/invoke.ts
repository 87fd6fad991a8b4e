/**
 * One inner LLM call, transport-free: validate the target, resolve credentials (tenant's own →
 * unbilled; none → system-hosted and charged), check the credit pool, then stream chunks from the
 * provider and finish with priced usage, recorded once per billing request id. api/inner/llm.ts
 * only adds HTTP (auth, SSE, disconnect → abort).
 */
import type { Logger } from '../logger.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { ChunkData, InvokeChunk, InvokeRequestParsed, ToolCall } from '../protocol/inner-llm.js';
import { Usage } from '../protocol/run.js';
import { openCredentials } from './credentials.js';
import { recordModelCall } from '../metrics/index.js';
import { billingRequestId, readCallState, recordUsage, type LedgerEntry } from './credits.js';
import { InvokeError, toInvokeError } from './errors.js';
import { publicInvokeMessage, redactSecrets } from './redact.js';
import { priceUsage } from './pricing.js';
import type { FinishReason, LlmProvider, ModelInfo, ProviderCredentials, ProviderRegistry, ProviderUsage } from './provider.js';
import { sleep } from './provider.js';
import { estimatedTokens, warmTokenizer } from './tokens.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** How long a finished call keeps trying to record its usage (a database restart/failover), ms. */
const RECORD_RETRY_MS = 60_000;

export interface LlmInvokerDeps {
  db: PrismaClient;
  providers: ProviderRegistry;
  /** Parsed ENCRYPTION_KEY. */
  encryptionKey: Buffer;
  logger: Logger;
  clock?: Clock;
}

/** A refusal before streaming (HTTP status + error code of docs/PROTOCOL.md §3). */
export interface InvokeRefusal {
  ok: false;
  status: 400 | 429;
  code: 'invalid_request' | 'agent_llm_quota_exceeded';
  message: string;
}

export interface PreparedInvoke {
  ok: true;
  billingRequestId: string;
  /** True when the tenant's own credentials are used (call recorded unbilled). */
  customCredentials: boolean;
  /** Streams the chunks; ends after the final usage chunk or one error chunk. Stops quietly once `signal` aborts. */
  run(signal: AbortSignal): AsyncGenerator<InvokeChunk>;
}

export interface LlmInvoker {
  prepare(req: InvokeRequestParsed): Promise<PreparedInvoke | InvokeRefusal>;
}

const refuse = (status: 400 | 429, code: InvokeRefusal['code'], message: string): InvokeRefusal => ({ ok: false, status, code, message });

export function createLlmInvoker(deps: LlmInvokerDeps): LlmInvoker {
  const clock = deps.clock ?? systemClock;
  // Ready before the first cut call must be recorded (tokens.ts warmTokenizer).
  warmTokenizer();

  return {
    async prepare(req) {
      const { caller, target } = req;
      const provider = deps.providers.get(target.provider);
      if (!provider) {
        const known = deps.providers.list().map((p) => p.name);
        return refuse(400, 'invalid_request', `target.provider: unknown provider '${target.provider}' (known: ${known.join(', ')})`);
      }
      const billingId = billingRequestId(caller.invocation_id, caller.call_index);
      // Credentials, the ledger's row for this call and the credit pool in one round trip; the checks below keep their order.
      const state = await readCallState(deps.db, caller.tenant_id, provider.name, billingId);
      const credentials = state.encryptedConfig === null ? null : openCredentials(deps.encryptionKey, provider.name, state.encryptedConfig);
      // The tenant's credentials may declare custom models of an open provider (openai_compatible, ollama).
      const model = provider.resolveModel(target.model, credentials);
      if (!model) return refuse(400, 'invalid_request', `target.model: provider '${provider.name}' has no model '${target.model}'`);
      const tools = target.tools ?? [];
      if (tools.length > 0 && !model.supports_tools) {
        return refuse(400, 'invalid_request', `target.tools: model '${model.model}' does not support tools`);
      }
      const hasImages = target.prompt_messages.some(
        (m) => m.role === 'user' && typeof m.content !== 'string' && m.content.some((p) => p.type === 'image'),
      );
      if (hasImages && !model.supports_vision) {
        return refuse(400, 'invalid_request', `target.prompt_messages: model '${model.model}' does not support images`);
      }

      if (!credentials && !provider.hasSystemCredentials()) {
        return refuse(
          400,
          'invalid_request',
          `target.provider: '${provider.name}' has no credentials for this tenant and no system-hosted configuration`,
        );
      }
      if (!credentials) {
        const quota = state.quota;
        if (!quota.allowed) {
          return refuse(429, 'agent_llm_quota_exceeded', `the tenant's model credits are used up (${quota.used} of ${quota.limit})`);
        }
      }
      return {
        ok: true,
        billingRequestId: billingId,
        customCredentials: credentials !== null,
        run: (signal) => runInvoke(deps, clock, req, provider, model, credentials, billingId, signal),
      };
    },
  };
}

async function* runInvoke(
  deps: LlmInvokerDeps,
  clock: Clock,
  req: InvokeRequestParsed,
  provider: LlmProvider,
  model: ModelInfo,
  credentials: ProviderCredentials | null,
  billingId: string,
  signal: AbortSignal,
): AsyncGenerator<InvokeChunk> {
  const { caller, target } = req;
  const log = deps.logger.child({
    tenant_id: caller.tenant_id,
    app_id: caller.app_id,
    agent_run_id: caller.agent_run_id,
    billing_request_id: billingId,
    provider: provider.name,
    model: model.model,
  });
  const started = clock.now();
  let firstTokenAt: number | null = null;
  let index = 0;
  let content = '';
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  let finish: { finish_reason: FinishReason; usage: ProviderUsage | null } | undefined;
  const metric = (outcome: 'ok' | 'error' | 'aborted', tokens?: { prompt_tokens: number; completion_tokens: number }, credits?: bigint) =>
    recordModelCall({ provider: provider.name, model: model.model, outcome, seconds: (clock.now() - started) / 1000, tokens, credits });
  const chunk = (delta: ChunkData['delta']): InvokeChunk => ({ code: 0, message: '', data: { model: model.model, delta } });
  // The caller (and through it the end user) gets a stable message; the details are logged, redacted (issue 17 L1).
  // `data.code` names what the user can do about it (provider_auth_failed, provider_rate_limited, ...).
  const failure = (err: InvokeError): InvokeChunk => ({
    code: err.code,
    message: publicInvokeMessage(err.errorType, err.reason),
    data: {
      error_type: err.errorType,
      message: publicInvokeMessage(err.errorType, err.reason),
      ...(err.reason ? { code: err.reason } : {}),
    },
  });
  /** The call's usage from its token counts: prices, timings, and whether the counts are estimated. */
  const priceCall = (tokens: ProviderUsage, estimated: boolean): Usage => {
    const ended = clock.now();
    return Usage.parse({
      ...priceUsage(tokens, model.pricing).usage,
      ...(tokens.cached_prompt_tokens ? { prompt_cached_tokens: tokens.cached_prompt_tokens } : {}),
      ...(tokens.reasoning_tokens ? { reasoning_tokens: tokens.reasoning_tokens } : {}),
      latency: (ended - started) / 1000,
      time_to_first_token: firstTokenAt === null ? null : (firstTokenAt - started) / 1000,
      time_to_generate: firstTokenAt === null ? null : (ended - firstTokenAt) / 1000,
      model_requests: 1,
      tool_calls: toolCalls.length,
      ...(estimated ? { estimated: true } : {}),
    });
  };
  const ledgerEntry = (usage: Usage, credits: bigint, estimated: boolean): LedgerEntry => ({
    tenantId: caller.tenant_id,
    billingRequestId: billingId,
    agentRunId: caller.agent_run_id,
    provider: provider.name,
    model: model.model,
    promptTokens: usage.prompt_tokens,
    completionTokens: usage.completion_tokens,
    credits,
    totalPrice: usage.total_price,
    currency: usage.currency,
    billable: credentials === null,
    estimated,
  });

  try {
    const events = provider.invoke({
      model: model.model,
      prompt_messages: target.prompt_messages,
      tools: target.tools ?? [],
      model_parameters: target.model_parameters,
      credentials,
      signal,
    });
    for await (const ev of events) {
      if (signal.aborted) break;
      if (ev.type === 'finish') {
        finish = ev;
        continue;
      }
      firstTokenAt ??= clock.now();
      content += ev.content ?? '';
      reasoning += ev.reasoning_content ?? '';
      toolCalls.push(...(ev.tool_calls ?? []));
      if (target.stream) {
        const message: ChunkData['delta']['message'] = { content: ev.content ?? '' };
        if (ev.reasoning_content) message.reasoning_content = ev.reasoning_content;
        if (ev.tool_calls?.length) message.tool_calls = ev.tool_calls;
        yield chunk({ index: index++, message });
      }
    }
  } catch (err) {
    if (!signal.aborted) {
      const e = toInvokeError(err);
      log.warn({ error_type: e.errorType, err: redactSecrets(e.message) }, 'model call failed');
      metric('error');
      yield failure(e);
      return;
    }
  }
  if (signal.aborted) {
    // The caller cut the call (a user's stop, a broken connection): the provider charges for what it
    // generated, so it is recorded, estimated, under the call's billing id. A replay of the same call
    // that completes replaces the estimate with exact counts (credits.ts); nothing is charged twice.
    log.info({ elapsed_ms: clock.now() - started }, 'model call aborted by the caller');
    const cut = estimatedTokens(target.prompt_messages, reasoning + content, toolCalls);
    const usage = priceCall(cut, true);
    try {
      const { charged } = await recordUsage(deps.db, ledgerEntry(usage, priceUsage(cut, model.pricing).credits, true));
      metric('aborted', cut, charged);
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'recording the usage of a cut model call failed');
    }
    return;
  }
  if (!finish) {
    metric('error');
    yield failure(new InvokeError('InvokeError', 'the model stream ended without a finish'));
    return;
  }
  if (!target.stream) {
    const message: ChunkData['delta']['message'] = { content };
    if (reasoning) message.reasoning_content = reasoning;
    if (toolCalls.length) message.tool_calls = toolCalls;
    yield chunk({ index: index++, message });
  }

  // Provider-reported counts where the provider reports them, else the tokenizer's estimate (flagged).
  const tokens = finish.usage ?? estimatedTokens(target.prompt_messages, reasoning + content, toolCalls);
  const usage = priceCall(tokens, finish.usage === null);

  let charged = 0n;
  const entry = ledgerEntry(usage, priceUsage(tokens, model.pricing).credits, finish.usage === null);
  // Recording is idempotent (unique billing id), so while the caller waits it is tried again: a
  // PostgreSQL restart at the end of a call must not fail an answer that was already streamed.
  for (let delay = 250, since = Date.now(), attempt = 1; ; delay = Math.min(delay * 2, 4_000), attempt++) {
    try {
      charged = (await recordUsage(deps.db, entry)).charged;
      break;
    } catch (err) {
      if (signal.aborted || Date.now() - since + delay > RECORD_RETRY_MS) {
        // Failing the call (rather than answering unbilled) lets the caller's retry bill it exactly once.
        log.error({ err: err instanceof Error ? err.message : String(err), attempts: attempt }, 'recording model usage failed');
        metric('error');
        if (!signal.aborted) yield failure(new InvokeError('InvokeError', 'recording the model usage failed; retry the call'));
        return;
      }
      if (attempt === 1) log.warn({ err: err instanceof Error ? err.message : String(err) }, 'recording model usage failed; retrying');
      try {
        await sleep(delay, signal);
      } catch {
        return; // the caller went away: nothing recorded, a replay bills once
      }
    }
  }
  log.info(
    {
      prompt_tokens: usage.prompt_tokens,
      completion_tokens: usage.completion_tokens,
      total_price: usage.total_price,
      credits_charged: charged.toString(),
      custom_credentials: credentials !== null,
      latency: usage.latency,
    },
    'model call finished',
  );
  metric('ok', tokens, charged);
  yield chunk({ index, message: { content: '' }, usage, finish_reason: finish.finish_reason });
}
