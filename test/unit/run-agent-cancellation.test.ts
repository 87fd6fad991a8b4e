/** Why the SDK cancelled a runAgent attempt: only a requested cancel is the user's stop. */
import { ActivityCancellationDetails, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { attemptLostError, cancellationCause } from '../../activities/run-agent/cancellation.js';

/** The two things the activity context says about a cancellation, as the SDK sets them. */
function cancelledBy(reason: string, details: ConstructorParameters<typeof ActivityCancellationDetails>[0]) {
  const signal = AbortSignal.abort(new CancelledFailure(reason));
  return { cancellationSignal: signal, cancellationDetails: new ActivityCancellationDetails(details) };
}

describe('cancellationCause', () => {
  it('is nothing while the attempt is not cancelled', () => {
    expect(cancellationCause({ cancellationSignal: new AbortController().signal, cancellationDetails: undefined })).toBeNull();
  });

  it('is a stop when the cancel was requested through Temporal', () => {
    expect(cancellationCause(cancelledBy('CANCELLED', { cancelRequested: true }))).toBe('stop_requested');
  });

  it.each([
    ['TIMED_OUT', { timedOut: true }],
    ['NOT_FOUND', { notFound: true }],
    ['WORKER_SHUTDOWN', { workerShutdown: true }],
    ['PAUSED', { paused: true }],
    ['RESET', { reset: true }],
  ])('is a lost attempt when cancelled for %s', (reason, details) => {
    expect(cancellationCause(cancelledBy(reason, details))).toBe('attempt_lost');
  });

  it('falls back to the SDK cancel reason when the details carry no flag', () => {
    expect(cancellationCause(cancelledBy('CANCELLED', {}))).toBe('stop_requested');
    expect(cancellationCause(cancelledBy('TIMED_OUT', {}))).toBe('attempt_lost');
  });
});

describe('attemptLostError', () => {
  it('is retryable, so Temporal runs the next attempt', () => {
    const err = attemptLostError(cancelledBy('TIMED_OUT', { timedOut: true }));
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).nonRetryable).toBe(false);
    expect(err.message).toContain('timed out');
  });

  it("leaves a pause or reset to the SDK's own report (a CancelledFailure)", () => {
    expect(attemptLostError(cancelledBy('PAUSED', { paused: true }))).toBeInstanceOf(CancelledFailure);
    expect(attemptLostError(cancelledBy('RESET', { reset: true }))).toBeInstanceOf(CancelledFailure);
  });
});
