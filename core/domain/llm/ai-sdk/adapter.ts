/**
 * One LlmProvider over an AI SDK provider package: the catalogue says which models it serves and what they
 * can do, `spec.model` builds the package's LanguageModelV3 for a call's credentials, and the call goes
 * through `doStream` directly (no `streamText`: the gateway owns retries, metering and the wire format).
 * request.ts, stream-parts.ts, finish-reason.ts and provider-errors.ts map each concern; this file only wires
 * them, with the retry of a rate-limited (429) or overloaded (503/529) call before its first token: the
 * provider's Retry-After when it sends one, else exponential backoff, then `provider_rate_limited`; and the stream's
 * first-token and idle timeouts (docs/models.md "Stream timeouts"): a provider that sends nothing, or stalls, has
 * its request aborted and the call ends `provider_timeout`, retried like a 503 while nothing was streamed. The
 * package's warnings about a call (a setting it dropped) go to the caller's `onWarnings`, once per call.
 */
import type { EmbeddingModelV3, LanguageModelV3, LanguageModelV3StreamPart, SharedV3ProviderOptions } from '@ai-sdk/provider';
import { z } from 'zod';
import type { CatalogueModel, ModelCatalogue, ModelDeclaration, StreamTimeouts } from '../catalogue/index.js';
import { resolveDeclaration, streamTimeoutsOf } from '../catalogue/index.js';
import { InvokeError } from '../errors.js';
import type {
  LlmProvider,
  ModelInfo,
  ProviderCredentials,
  ProviderEmbedRequest,
  ProviderEvent,
  ProviderInvokeRequest,
} from '../provider.js';
import { modelInfoOf, sleep } from '../provider.js';
import { toProviderInvokeError } from './provider-errors.js';
import { toCallOptions } from './request.js';
import { toProviderEvents } from './stream-parts.js';
import { toProviderWarning } from './warnings.js';

export interface RetryOptions {
  /** Retries after the first attempt (default 2). */
  maxRetries: number;
  /** First backoff without a Retry-After, ms (default 1 000; doubled each retry). */
  baseDelayMs: number;
  /** A wait longer than this is not waited for: the call fails at once as rate limited (default 20 000). */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { maxRetries: 2, baseDelayMs: 1_000, maxDelayMs: 20_000 };

export interface AiSdkProviderSpec<C extends ProviderCredentials> {
  name: string;
  catalogue: ModelCatalogue;
  /** Tenant credentials (validated on save; the error names the field). */
  credentials: z.ZodType<C>;
  /** The deployment's own credentials (system-hosted, billed), when configured. */
  system?: C;
  /** The package's language model for these credentials (the package is imported on first use: startup stays light). */
  model(credentials: C, model: string, fetchImpl?: typeof fetch): Promise<LanguageModelV3>;
  /** The package's embedding model, for providers that offer embeddings. */
  embedding?(credentials: C, model: string, fetchImpl?: typeof fetch): Promise<EmbeddingModelV3>;
  /** Credential values to cut out of any message (keys, secrets). */
  secrets(credentials: C): (string | undefined)[];
  /** Models the tenant's credentials declare (open providers). */
  declared?(credentials: C): Omit<ModelDeclaration, 'provider'>[];
  /** Provider-specific options for a call (e.g. Anthropic's thinking for a reasoning model). */
  providerOptions?(model: CatalogueModel, params: Record<string, unknown>): SharedV3ProviderOptions | undefined;
  /** The model a credential check calls when none is named. */
  probeModel?: string;
  fetch?: typeof fetch;
  /**
   * The fetch of calls on a tenant's own credentials (their base_url is the tenant's to choose): the SSRF guard
   * unless MODEL_ALLOW_PRIVATE_NETWORK (providers/index.ts). Default: `fetch`.
   */
  tenantFetch?: typeof fetch;
  retry?: Partial<RetryOptions>;
  /** The deployment's stream timeouts (MODEL_FIRST_TOKEN_TIMEOUT_MS, MODEL_IDLE_TIMEOUT_MS): over the catalogue's. */
  timeouts?: Partial<StreamTimeouts>;
}

/** The watchdog's verdict on one attempt: which limit it passed. */
class StreamTimeout extends Error {
  constructor(
    readonly phase: 'first_token' | 'idle',
    readonly ms: number,
  ) {
    super(phase === 'first_token' ? `no first token within ${ms} ms` : `the stream stalled for ${ms} ms`);
  }
}

/** Parts that say the provider is answering (its stream-start and response metadata come with the headers). */
const isProgress = (part: LanguageModelV3StreamPart) => part.type !== 'stream-start' && part.type !== 'response-metadata';

const SECRET_KEY = /key|secret|token|password/i;

/** `sk-…7f3a` for long secrets, `****` for short ones. */
export function maskSecret(value: string): string {
  return value.length >= 12 ? `${value.slice(0, 3)}…${value.slice(-4)}` : '****';
}

export function createAiSdkProvider<C extends ProviderCredentials>(spec: AiSdkProviderSpec<C>): LlmProvider {
  const retry = { ...DEFAULT_RETRY, ...spec.retry };

  const parse = (raw: unknown): C => {
    const r = spec.credentials.safeParse(raw);
    if (!r.success) throw new Error(r.error.issues.map((i) => `credentials.${i.path.join('.')}: ${i.message}`).join('; '));
    return r.data;
  };
  /** The credentials of a call: the tenant's (parsed), else the deployment's. */
  const credentialsOf = (raw: ProviderCredentials | null | undefined): C => {
    if (raw) {
      const r = spec.credentials.safeParse(raw);
      if (!r.success)
        throw new InvokeError('InvokeAuthorizationError', `the saved ${spec.name} credentials are invalid`, {
          reason: 'provider_auth_failed',
        });
      return r.data;
    }
    if (!spec.system)
      throw new InvokeError('InvokeAuthorizationError', `${spec.name} has no credentials configured`, { reason: 'provider_auth_failed' });
    return spec.system;
  };
  const declaredOf = (raw: ProviderCredentials | null | undefined, model: string): CatalogueModel | undefined => {
    if (!raw || !spec.declared) return undefined;
    const r = spec.credentials.safeParse(raw);
    const d = r.success ? spec.declared(r.data).find((m) => m.model === model) : undefined;
    return d ? resolveDeclaration(spec.catalogue, { ...d, provider: spec.name }) : undefined;
  };
  /** Every model the tenant's credentials declare, resolved (a declaration that does not resolve is left out). */
  const declaredList = (raw: ProviderCredentials | null | undefined): CatalogueModel[] => {
    if (!raw || !spec.declared) return [];
    const r = spec.credentials.safeParse(raw);
    if (!r.success) return [];
    return spec.declared(r.data).flatMap((d) => {
      try {
        return [resolveDeclaration(spec.catalogue, { ...d, provider: spec.name })];
      } catch {
        return [];
      }
    });
  };
  const entryOf = (model: string, raw?: ProviderCredentials | null): CatalogueModel | undefined =>
    spec.catalogue.find(spec.name, model) ?? declaredOf(raw, model) ?? spec.catalogue.fallback(spec.name, model);

  async function* invoke(req: ProviderInvokeRequest): AsyncGenerator<ProviderEvent> {
    const creds = credentialsOf(req.credentials);
    const secrets = spec.secrets(creds);
    const entry = entryOf(req.model, req.credentials);
    const model = await spec.model(creds, req.model, req.credentials ? (spec.tenantFetch ?? spec.fetch) : spec.fetch);
    const options = toCallOptions(req);
    const providerOptions = entry && spec.providerOptions?.(entry, req.model_parameters);
    if (providerOptions) options.providerOptions = providerOptions;
    if (entry && !entry.temperature) delete options.temperature;
    const limits = streamTimeoutsOf(entry, spec.timeouts);
    // The package's warnings come in each attempt's stream-start: reported once, not once per retry.
    let warned = false;
    const warn = (part: LanguageModelV3StreamPart) => {
      if (warned || part.type !== 'stream-start' || part.warnings.length === 0 || !req.onWarnings) return;
      warned = true;
      req.onWarnings(part.warnings.map(toProviderWarning));
    };

    for (let attempt = 0; ; attempt++) {
      let yielded = false;
      // The attempt's own abort: the caller's, or the watchdog's when the provider is silent for too long.
      const abort = new AbortController();
      const onAbort = () => abort.abort(req.signal.reason);
      req.signal.addEventListener('abort', onAbort, { once: true });
      let timer: NodeJS.Timeout | undefined;
      let timedOut: StreamTimeout | null = null;
      const arm = (phase: StreamTimeout['phase'], ms: number) => {
        clearTimeout(timer);
        if (ms > 0)
          timer = setTimeout(() => {
            timedOut = new StreamTimeout(phase, ms);
            abort.abort(timedOut);
          }, ms);
      };
      arm('first_token', limits.firstTokenMs);
      let answering = false;
      try {
        const { stream } = await model.doStream({ ...options, abortSignal: abort.signal });
        answering = true;
        const watched = stream.pipeThrough(
          new TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart>({
            transform(part, ctrl) {
              warn(part);
              if (isProgress(part)) arm('idle', limits.idleMs);
              ctrl.enqueue(part);
            },
          }),
        );
        for await (const ev of toProviderEvents(watched)) {
          if (timedOut) break;
          yielded = true;
          yield ev;
        }
        if (timedOut) throw timedOut;
        return;
      } catch (err) {
        if (req.signal.aborted) throw req.signal.reason;
        const t = timedOut as StreamTimeout | null;
        const e = t
          ? new InvokeError('InvokeConnectionError', `${spec.name} ${t.message}`, { reason: 'provider_timeout' })
          : toProviderInvokeError(err, secrets, answering ? 'stream' : 'request');
        // Worth another attempt while nothing was streamed: a rate limit or overload (its Retry-After), a stall, a
        // connection cut before the first token. Credentials, billing, a bad request or an unreachable host: not.
        const retryable =
          e.errorType === 'InvokeRateLimitError' ||
          e.errorType === 'InvokeServerUnavailableError' ||
          e.reason === 'provider_timeout' ||
          e.reason === 'provider_stream_interrupted';
        const wait = e.retryAfterMs ?? retry.baseDelayMs * 2 ** attempt;
        if (yielded || !retryable || attempt >= retry.maxRetries || wait > retry.maxDelayMs) throw e;
        await sleep(wait, req.signal);
      } finally {
        clearTimeout(timer);
        req.signal.removeEventListener('abort', onAbort);
        abort.abort();
      }
    }
  }

  const provider: LlmProvider = {
    name: spec.name,
    models: (credentials) => {
      const listed = spec.catalogue.list(spec.name);
      const own = declaredList(credentials).filter((d) => !listed.some((m) => m.model === d.model));
      return [...listed, ...own].map(modelInfoOf);
    },
    resolveModel: (model, credentials): ModelInfo | undefined => {
      const e = entryOf(model, credentials);
      return e ? modelInfoOf(e) : undefined;
    },
    isKnownModel: (model, credentials) => Boolean(spec.catalogue.find(spec.name, model) ?? declaredOf(credentials, model)),
    hasSystemCredentials: () => spec.system !== undefined,
    parseCredentials: (raw) => parse(raw),
    maskCredentials: (raw) =>
      Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, typeof v === 'string' && SECRET_KEY.test(k) ? maskSecret(v) : v])),
    invoke,
    async checkCredentials(raw, opts) {
      const creds = parse(raw);
      const modelId = opts.model ?? spec.probeModel ?? spec.catalogue.list(spec.name)[0]?.model;
      if (!modelId) throw new InvokeError('InvokeBadRequestError', `name a model to check ${spec.name} credentials with`);
      const controller = new AbortController();
      const onAbort = () => controller.abort(opts.signal.reason);
      opts.signal.addEventListener('abort', onAbort, { once: true });
      try {
        const events = invoke({
          model: modelId,
          prompt_messages: [{ role: 'user', content: 'Say OK.' }],
          tools: [],
          model_parameters: { max_tokens: 16 },
          credentials: creds,
          signal: controller.signal,
        });
        // The first token or the finish proves the credentials; the rest is not waited for.
        for await (const ev of events) if (ev.type === 'finish' || ev.content || ev.reasoning_content) break;
      } finally {
        opts.signal.removeEventListener('abort', onAbort);
        controller.abort();
      }
    },
  };
  if (spec.embedding) {
    const embedding = spec.embedding;
    provider.embed = async (req: ProviderEmbedRequest) => {
      const creds = credentialsOf(req.credentials);
      try {
        const model = await embedding(creds, req.model, spec.fetch);
        const { embeddings } = await model.doEmbed({ values: req.texts, abortSignal: req.signal });
        return embeddings;
      } catch (err) {
        if (req.signal.aborted) throw req.signal.reason;
        throw toProviderInvokeError(err, spec.secrets(creds));
      }
    };
  }
  return provider;
}
