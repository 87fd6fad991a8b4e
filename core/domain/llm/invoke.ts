/**
 * One inner LLM call, transport-free: validate the target, resolve credentials (tenant's own →
 * unbilled; none → system-hosted and charged), check the credit pool, then stream chunks from the
 * provider and finish with priced usage, recorded once per billing request id. api/inner/llm.ts
 * only adds HTTP (auth, SSE, disconnect → abort).
 */
import type { Logger } from '../../platform/logger.js';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { ChunkData, InvokeChunk, InvokeRequestParsed, ProviderMetadata, ReasoningPart, ToolCall } from '../../protocol/inner-llm.js';
import { Usage } from '../../protocol/run.js';
import { StoredCredentials, type GatewayCache } from './gateway-cache.js';
import { recordModelCall, recordModelWarning } from '../../platform/metrics/index.js';
import { billingRequestId, readCallState, recordUsage, type LedgerEntry, type QuotaCheck } from './credits.js';
import { InvokeError, toInvokeError } from './errors.js';
import { publicInvokeMessage, redactSecrets } from './redact.js';
import { isFree, priceUsage } from './pricing.js';
import type {
  FinishReason,
  LlmProvider,
  ModelInfo,
  ProviderCredentials,
  ProviderRegistry,
  ProviderUsage,
  ProviderWarning,
} from './provider.js';
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
  /** Credentials and pool verdicts kept in process, invalidated by NOTIFY (gateway-cache.ts); none: read per call. */
  cache?: GatewayCache;
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
  /** `messageId`: the turn's message (from the verified execution context), named in the call's logs. */
  prepare(req: InvokeRequestParsed, opts?: { messageId?: string }): Promise<PreparedInvoke | InvokeRefusal>;
}

const refuse = (status: 400 | 429, code: InvokeRefusal['code'], message: string): InvokeRefusal => ({ ok: false, status, code, message });

export function createLlmInvoker(deps: LlmInvokerDeps): LlmInvoker {
  const clock = deps.clock ?? systemClock;
  // Ready before the first cut call must be recorded (tokens.ts warmTokenizer).
  warmTokenizer();

  return {
    async prepare(req, opts = {}) {
      const { caller, target } = req;
      const provider = deps.providers.get(target.provider);
      if (!provider) {
        const known = deps.providers.list().map((p) => p.name);
        return refuse(400, 'invalid_request', `target.provider: unknown provider '${target.provider}' (known: ${known.join(', ')})`);
      }
      const billingId = billingRequestId(caller.invocation_id, caller.call_index);
      const state = await callState(deps, caller.tenant_id, provider.name, billingId);
      const credentials = state.credentials.open(deps.encryptionKey);
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
      // A free model (a system-hosted Ollama) is never billed, so a used-up pool does not stop it.
      if (!credentials && !isFree(model.pricing)) {
        const quota = state.quota;
        if (!quota.allowed) {
          return refuse(429, 'agent_llm_quota_exceeded', `the tenant's model credits are used up (${quota.used} of ${quota.limit})`);
        }
      }
      return {
        ok: true,
        billingRequestId: billingId,
        customCredentials: credentials !== null,
        run: (signal) => runInvoke(modelCall(deps, clock, req, provider, model, credentials, billingId, opts.messageId), signal),
      };
    },
  };
}

/**
 * The call's credentials and quota check. From the gateway cache when it has the credentials and, for a
 * system-hosted call, a pool that is not used up: no statement. Otherwise credentials, the ledger's row for this call
 * and the credit pool in one round trip (readCallState), which fills the cache; a refusal (a used-up pool, unless the
 * ledger already has this billing id) is only ever decided on that fresh read.
 */
async function callState(
  deps: LlmInvokerDeps,
  tenantId: string,
  provider: string,
  billingId: string,
): Promise<{ credentials: StoredCredentials; quota: QuotaCheck }> {
  const cache = deps.cache;
  const cached = cache?.getCredentials(tenantId, provider);
  if (cached) {
    if (cached.encrypted !== null) return { credentials: cached, quota: { allowed: true, alreadyBilled: false } };
    const pool = cache!.getPool(tenantId);
    if (pool && !(pool.exists && pool.exhausted)) return { credentials: cached, quota: { allowed: true, alreadyBilled: false } };
  }
  const token = cache?.token() ?? 0;
  const state = await readCallState(deps.db, tenantId, provider, billingId);
  const credentials = cache
    ? cache.putCredentials(token, tenantId, provider, state.encryptedConfig)
    : new StoredCredentials(provider, state.encryptedConfig);
  cache?.putPool(token, tenantId, state.pool);
  return { credentials, quota: state.quota };
}

/**
 * One model call in three phases: stream the provider's answer (`streamAnswer`), then either record a call the caller
 * cut (`recordCutCall`) or settle a finished one (`settleCall`: the answer's last chunk, its usage recorded in the
 * ledger, the usage chunk).
 */
async function* runInvoke(call: ModelCall, signal: AbortSignal): AsyncGenerator<InvokeChunk> {
  if ((yield* streamAnswer(call, signal)) === 'failed') return;
  if (signal.aborted) {
    await recordCutCall(call);
    return;
  }
  yield* settleCall(call, signal);
}

type ModelCall = ReturnType<typeof modelCall>;

/** What the phases of one call share: its log, metric and chunk builders, and what the provider streamed so far. */
function modelCall(
  deps: LlmInvokerDeps,
  clock: Clock,
  req: InvokeRequestParsed,
  provider: LlmProvider,
  model: ModelInfo,
  credentials: ProviderCredentials | null,
  billingId: string,
  messageId: string | undefined,
) {
  const { caller, target } = req;
  const log = deps.logger.child({
    tenant_id: caller.tenant_id,
    app_id: caller.app_id,
    ...(messageId ? { message_id: messageId } : {}),
    agent_run_id: caller.agent_run_id,
    billing_request_id: billingId,
    provider: provider.name,
    model: model.model,
  });
  const started = clock.now();
  const streamed = {
    firstTokenAt: null as number | null,
    index: 0,
    content: '',
    reasoning: '',
    reasoningParts: [] as ReasoningPart[],
    contentMetadata: undefined as ProviderMetadata | undefined,
    toolCalls: [] as ToolCall[],
    finish: undefined as { finish_reason: FinishReason; usage: ProviderUsage | null } | undefined,
  };
  const metric = (outcome: 'ok' | 'error' | 'aborted', tokens?: { prompt_tokens: number; completion_tokens: number }, credits?: bigint) =>
    recordModelCall({ provider: provider.name, model: model.model, outcome, seconds: (clock.now() - started) / 1000, tokens, credits });
  const chunk = (delta: ChunkData['delta']): InvokeChunk => ({ code: 0, message: '', data: { model: model.model, delta } });
  // The caller (and through it the end user) gets a stable message; the details are logged, redacted (issue 17 L1).
  // `data.code` names what the user can do about it (provider_auth_failed, provider_rate_limited, ...).
  const failure = (err: InvokeError, usage?: Usage): InvokeChunk => ({
    code: err.code,
    message: publicInvokeMessage(err.errorType, err.reason),
    data: {
      error_type: err.errorType,
      message: publicInvokeMessage(err.errorType, err.reason),
      ...(err.reason ? { code: err.reason } : {}),
      ...(usage ? { usage } : {}),
    },
  });
  /** The call's usage from its token counts: prices, timings, and whether the counts are estimated. */
  const priceCall = (tokens: ProviderUsage, estimated: boolean): Usage => {
    const ended = clock.now();
    const { firstTokenAt } = streamed;
    return Usage.parse({
      ...priceUsage(tokens, model.pricing).usage,
      ...(tokens.cached_prompt_tokens ? { prompt_cached_tokens: tokens.cached_prompt_tokens } : {}),
      ...(tokens.reasoning_tokens ? { reasoning_tokens: tokens.reasoning_tokens } : {}),
      latency: (ended - started) / 1000,
      time_to_first_token: firstTokenAt === null ? null : (firstTokenAt - started) / 1000,
      time_to_generate: firstTokenAt === null ? null : (ended - firstTokenAt) / 1000,
      model_requests: 1,
      tool_calls: streamed.toolCalls.length,
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
    billable: credentials === null && !isFree(model.pricing),
    estimated,
  });
  /** This call's increment moved the pool: the cache learns the pool's verdict at once, before the NOTIFY of a crossing. */
  const notePool = (exhausted: boolean | undefined) => {
    if (exhausted !== undefined) deps.cache?.notePool(caller.tenant_id, exhausted);
  };
  /**
   * The provider package dropped or changed something of the call (a setting the model does not support): a warn line
   * naming the message, and a count by setting, so a saved setting that never reached the model shows somewhere.
   */
  const warned = (warnings: ProviderWarning[]) => {
    log.warn({ warnings }, 'the model provider dropped or changed settings of the call');
    for (const w of warnings) recordModelWarning({ provider: provider.name, model: model.model, type: w.type, feature: w.feature });
  };
  /** The tokenizer's estimate of what was sent and streamed (a cut call, a provider that reports no usage). */
  const estimate = () => estimatedTokens(target.prompt_messages, streamed.reasoning + streamed.content, streamed.toolCalls);
  return {
    deps,
    clock,
    target,
    provider,
    model,
    credentials,
    log,
    started,
    streamed,
    metric,
    chunk,
    failure,
    priceCall,
    ledgerEntry,
    notePool,
    warned,
    estimate,
  };
}

/** Phase 1: the provider's events, passed on as chunks when the caller streams, gathered either way. */
async function* streamAnswer(call: ModelCall, signal: AbortSignal): AsyncGenerator<InvokeChunk, 'streamed' | 'failed'> {
  const { target, streamed: s } = call;
  try {
    const events = call.provider.invoke({
      model: call.model.model,
      prompt_messages: target.prompt_messages,
      tools: target.tools ?? [],
      model_parameters: target.model_parameters,
      credentials: call.credentials,
      signal,
      onWarnings: call.warned,
    });
    for await (const ev of events) {
      if (signal.aborted) break;
      if (ev.type === 'finish') {
        s.finish = ev;
        continue;
      }
      if (ev.content || ev.reasoning_content || ev.tool_calls?.length) s.firstTokenAt ??= call.clock.now();
      s.content += ev.content ?? '';
      s.reasoning += ev.reasoning_content ?? '';
      s.reasoningParts.push(...(ev.reasoning_parts ?? []));
      if (ev.content_provider_metadata) s.contentMetadata = ev.content_provider_metadata;
      s.toolCalls.push(...(ev.tool_calls ?? []));
      if (target.stream) {
        const message: ChunkData['delta']['message'] = { content: ev.content ?? '' };
        if (ev.reasoning_content) message.reasoning_content = ev.reasoning_content;
        if (ev.reasoning_parts?.length) message.reasoning_parts = ev.reasoning_parts;
        if (ev.content_provider_metadata) message.content_provider_metadata = ev.content_provider_metadata;
        if (ev.tool_calls?.length) message.tool_calls = ev.tool_calls;
        yield call.chunk({ index: s.index++, message });
      }
    }
  } catch (err) {
    if (!signal.aborted) {
      const e = toInvokeError(err);
      call.log.warn({ error_type: e.errorType, reason: e.reason, err: redactSecrets(e.message) }, 'model call failed');
      // A provider that stalled worked on the call (and bills it): recorded as a cut call, estimated
      // (docs/models.md "Stream timeouts"); any other failure records nothing, so its retry is charged once.
      if (e.reason === 'provider_timeout') {
        yield call.failure(e, await recordCutCall(call, 'error'));
        return 'failed';
      }
      call.metric('error');
      yield call.failure(e);
      return 'failed';
    }
  }
  return 'streamed';
}

/**
 * Phase 2, a call the caller cut (a user's stop, a broken connection) or the provider stalled (`provider_timeout`):
 * the provider charges for what it generated, so it is recorded, estimated, under the call's billing id. A replay of the same call
 * that completes replaces the estimate with exact counts (credits.ts); nothing is charged twice.
 */
async function recordCutCall(call: ModelCall, outcome: 'aborted' | 'error' = 'aborted'): Promise<Usage> {
  if (outcome === 'aborted') call.log.info({ elapsed_ms: call.clock.now() - call.started }, 'model call aborted by the caller');
  const cut = call.estimate();
  const usage = call.priceCall(cut, true);
  try {
    const recorded = await recordUsage(call.deps.db, call.ledgerEntry(usage, priceUsage(cut, call.model.pricing).credits, true));
    call.notePool(recorded.poolExhausted);
    call.metric(outcome, cut, recorded.charged);
  } catch (err) {
    call.metric(outcome, cut);
    call.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'recording the usage of a cut model call failed');
  }
  return usage;
}

/** Phase 3, a finished call: the whole answer (not streaming), its usage recorded in the ledger, the usage chunk. */
async function* settleCall(call: ModelCall, signal: AbortSignal): AsyncGenerator<InvokeChunk> {
  const { target, streamed: s, log } = call;
  const finish = s.finish;
  if (!finish) {
    call.metric('error');
    yield call.failure(new InvokeError('InvokeError', 'the model stream ended without a finish'));
    return;
  }
  if (!target.stream) {
    const message: ChunkData['delta']['message'] = { content: s.content };
    if (s.reasoning) message.reasoning_content = s.reasoning;
    if (s.reasoningParts.length) message.reasoning_parts = s.reasoningParts;
    if (s.contentMetadata) message.content_provider_metadata = s.contentMetadata;
    if (s.toolCalls.length) message.tool_calls = s.toolCalls;
    yield call.chunk({ index: s.index++, message });
  }

  // Provider-reported counts where the provider reports them, else the tokenizer's estimate (flagged).
  const tokens = finish.usage ?? call.estimate();
  const usage = call.priceCall(tokens, finish.usage === null);

  let charged = 0n;
  const entry = call.ledgerEntry(usage, priceUsage(tokens, call.model.pricing).credits, finish.usage === null);
  // Recording is idempotent (unique billing id), so while the caller waits it is tried again: a
  // PostgreSQL restart at the end of a call must not fail an answer that was already streamed.
  for (let delay = 250, since = Date.now(), attempt = 1; ; delay = Math.min(delay * 2, 4_000), attempt++) {
    try {
      const recorded = await recordUsage(call.deps.db, entry);
      charged = recorded.charged;
      call.notePool(recorded.poolExhausted);
      break;
    } catch (err) {
      if (signal.aborted || Date.now() - since + delay > RECORD_RETRY_MS) {
        // Failing the call (rather than answering unbilled) lets the caller's retry bill it exactly once.
        log.error({ err: err instanceof Error ? err.message : String(err), attempts: attempt }, 'recording model usage failed');
        call.metric('error');
        if (!signal.aborted) yield call.failure(new InvokeError('InvokeError', 'recording the model usage failed; retry the call'));
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
      custom_credentials: call.credentials !== null,
      latency: usage.latency,
    },
    'model call finished',
  );
  call.metric('ok', tokens, charged);
  yield call.chunk({ index: s.index, message: { content: '' }, usage, finish_reason: finish.finish_reason });
}
