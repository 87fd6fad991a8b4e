/**
 * Errors of the agent backend. HTTP errors answer as JSON `{code, message, status}` (the same shape
 * the api uses); run errors classify how a run ended (terminal event data).
 */
import type { Usage } from '../core/protocol/run.js';
import type { ErrorCode } from '../core/protocol/error-codes.js';
import type { z } from 'zod';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** One readable line per zod issue, each naming the offending path (and unknown keys by name). */
export function formatZodError(error: z.ZodError, prefix = ''): string {
  return error.issues
    .map((issue) => {
      const path = [prefix, ...issue.path.map(String)].filter(Boolean).join('.');
      const where = path ? `${path}: ` : '';
      if (issue.code === 'unrecognized_keys') {
        const keys = (issue as { keys: string[] }).keys;
        return `${where}unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => `'${k}'`).join(', ')}`;
      }
      return `${where}${issue.message}`;
    })
    .join('; ');
}

/** A run budget was exhausted (model requests, tool calls): `error_type: agent_run_limit_exceeded`. */
export class RunLimitExceededError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunLimitExceededError';
  }
}

/**
 * A layer refused to enter (the runtime's workspace was not authorized for this run, issue 27): the run ends
 * `run_failed` with this `error_type` (the api shows it) and/or `reason`, and the message as its error.
 */
export class RunRefusedError extends Error {
  constructor(
    readonly errorType: ErrorCode | null,
    message: string,
    readonly reason: ErrorCode | null = null,
  ) {
    super(message);
    this.name = 'RunRefusedError';
  }
}

/**
 * A model call failed: the inner LLM endpoint answered an error status or streamed a chunk with a
 * negative code. `errorType` is the Dify InvokeError kind and becomes the run's failure `reason`.
 */
export class ModelCallError extends Error {
  constructor(
    readonly errorType: string,
    message: string,
    readonly status?: number,
    /** The gateway's actionable code (provider_auth_failed, …): the run's failure reason when present. */
    readonly code?: string,
    /** What the gateway billed for the failed call (estimated; a provider that stalled mid-answer). */
    readonly usage?: Partial<Usage>,
  ) {
    super(message);
    this.name = 'ModelCallError';
  }
}

/** Why a run's abort signal fired; carried as the AbortSignal reason. */
export type AbortCause =
  | { kind: 'cancel'; reason?: string; message?: string }
  | { kind: 'timeout'; limitMs: number }
  | { kind: 'shutdown' }
  /** An event could not be stored (PostgreSQL away past the run's deadline): the run fails loudly. */
  | { kind: 'store_failed'; reason: 'event_store_unavailable' | 'event_store_error' }
  /** Test/crash simulation: the process "dies", nothing more is written for the run. */
  | { kind: 'abandon' };

export function abortCause(signal: AbortSignal): AbortCause | null {
  if (!signal.aborted) return null;
  const r = signal.reason as AbortCause | undefined;
  return r && typeof r === 'object' && 'kind' in r ? r : { kind: 'shutdown' };
}
