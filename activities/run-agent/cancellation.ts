/**
 * Why the SDK cancelled this attempt, and the user's stop. Only a cancel requested through Temporal (the
 * user pressed stop) stops the backend run. Any other cancellation ends only this attempt: heartbeats could
 * not reach the server past the heartbeat timeout (`timedOut`), the server no longer knows the attempt
 * (`notFound`), the worker shuts down, an operator paused or reset the activity. The backend run goes on,
 * and the next attempt reattaches to it from the committed cursor (issue 22: a Temporal outage must not
 * end a turn as if the user had stopped it).
 */
import type { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import type { Logger } from '../../core/platform/logger.js';

export type CancellationCause = 'stop_requested' | 'attempt_lost';

/** The failure type of a lost attempt (retryable). */
export const ATTEMPT_LOST = 'AgentRunAttemptLost';

type CancellationView = Pick<Context, 'cancellationSignal' | 'cancellationDetails'>;

/** null while the attempt is not cancelled. */
export function cancellationCause(ctx: CancellationView): CancellationCause | null {
  if (!ctx.cancellationSignal.aborted) return null;
  const d = ctx.cancellationDetails;
  if (d?.cancelRequested) return 'stop_requested';
  const flagged = d !== undefined && (d.timedOut || d.notFound || d.workerShutdown || d.paused || d.reset);
  // No flag at all (a server that sends no details): the SDK's cancel reason still says whether it was requested.
  const reason: unknown = ctx.cancellationSignal.reason;
  if (!flagged && reason instanceof CancelledFailure && reason.message === 'CANCELLED') return 'stop_requested';
  return 'attempt_lost';
}

/** What a lost attempt throws: retryable, so Temporal runs the next attempt (a pause or reset: the SDK's own report). */
export function attemptLostError(ctx: CancellationView): Error {
  const d = ctx.cancellationDetails;
  if (d?.paused) return new CancelledFailure('activity paused');
  if (d?.reset) return new CancelledFailure('activity reset');
  const why = d?.timedOut
    ? 'timed out'
    : d?.notFound
      ? 'unknown to the server'
      : d?.workerShutdown
        ? 'worker shutting down'
        : 'cancelled without a request';
  return ApplicationFailure.retryable(`runAgent attempt lost (${why}); the next attempt reattaches to the backend run`, ATTEMPT_LOST);
}

export function isAttemptLost(err: unknown): boolean {
  return err instanceof ApplicationFailure && err.type === ATTEMPT_LOST;
}

/**
 * The user's stop: ask the backend to cancel once, then wait for its terminal event until STOP_WAIT_MS has
 * passed (after that the turn ends with what it has: terminal.ts stopWithoutTerminal).
 */
export class UserStop {
  requested = false;
  private deadline = Infinity;

  constructor(
    private readonly backend: Pick<AgentBackendClient, 'cancelRun'>,
    private readonly backendRunId: string,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {}

  async request(): Promise<void> {
    if (this.requested) return;
    this.requested = true;
    this.deadline = Date.now() + this.waitMs;
    try {
      const r = await this.backend.cancelRun(this.backendRunId, { reason: 'user_stop', message: 'Stopped by the user.' });
      this.log.info({ ended: r.ended }, 'backend cancel requested');
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'backend cancel failed; waiting for the run to end anyway');
    }
  }

  /** Milliseconds left to wait for the backend's confirmation; null when no stop was requested. */
  timeLeft(now = Date.now()): number | null {
    return this.deadline === Infinity ? null : Math.max(0, this.deadline - now);
  }

  overdue(now = Date.now()): boolean {
    return now >= this.deadline;
  }
}
