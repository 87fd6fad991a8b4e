/**
 * How the backend's model adapter retries a call to the inner LLM endpoint after a transport failure: one
 * failure episode may last `budgetMs`, attempts back off from `baseMs` to `maxMs`, and new output starts a
 * fresh episode (see inner-llm-model.ts for what counts as a transport failure).
 */
import { ModelCallError } from '../errors.js';

export interface InnerLlmRetryOptions {
  /** How long one failure episode may last (first failure → last attempt), ms. 0: no retries. */
  budgetMs: number;
  /** Backoff between attempts: doubles from `baseMs` up to `maxMs`. */
  baseMs: number;
  maxMs: number;
}

/** 60 s: an api restart, or a PostgreSQL restart/failover behind the gateway (10–60 s). */
export const DEFAULT_INNER_LLM_RETRY: InnerLlmRetryOptions = { budgetMs: 60_000, baseMs: 250, maxMs: 4_000 };

/** A failure of the way to the inner endpoint (not of the model): worth sending the same call again. */
export class TransportFailure extends ModelCallError {}

/** Backoff within one failure episode; progress (new output) starts a fresh episode. */
export class RetryBudget {
  private since: number | null = null;
  private delay: number;
  attempts = 0;
  constructor(private readonly opts: InnerLlmRetryOptions) {
    this.delay = opts.baseMs;
  }
  /** Sleeps before the next attempt; false when the episode's budget is spent. */
  async wait(signal: AbortSignal | undefined): Promise<boolean> {
    const now = Date.now();
    this.since ??= now;
    if (now - this.since + this.delay > this.opts.budgetMs) return false;
    await abortableSleep(this.delay, signal);
    this.delay = Math.min(this.delay * 2, this.opts.maxMs);
    this.attempts++;
    return true;
  }
  progress(): void {
    this.since = null;
    this.delay = this.opts.baseMs;
  }
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
