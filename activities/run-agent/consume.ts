/**
 * The consume loop (docs/seeds/001 _consume_stream): reads the run's events after the committed cursor, debounces
 * text deltas (commit.ts), commits thought rows as they change (thoughts.ts) and hands the terminal event to
 * terminal.ts. Heartbeats carry run id + cursor. A stream that breaks or ends without a terminal event is
 * reattached from the committed cursor (bounded). A user stop asks the backend to cancel and waits, bounded,
 * for its terminal event; a lost attempt stops consuming at once and leaves the backend run alone
 * (cancellation.ts).
 */
import { CancelledFailure } from '@temporalio/common';
import type { RunEvent } from '../../core/protocol/run.js';
import { attemptLostError, cancellationCause, isAttemptLost, UserStop } from './cancellation.js';
import { consuming, FencedOut } from './commit.js';
import type { RunAgentOutcome, RunScope } from './scope.js';
import { endRun, isTerminalEvent, stopWithoutTerminal } from './terminal.js';
import { attachToolFiles } from './tool-files.js';

const TIMER = Symbol('timer');
const LOST = Symbol('lost');
const MAX_RECONNECTS = 5;
const HEARTBEAT_EVERY_MS = 1000;

export async function consumeRun(scope: RunScope, backendRunId: string): Promise<RunAgentOutcome> {
  const { ctx, log, committer, thoughts } = scope;
  const { backend, config } = scope.deps;
  const stop = new UserStop(backend, backendRunId, config.STOP_WAIT_MS, log);
  const lost = new AbortController();
  const onCancel = () => {
    if (cancellationCause(ctx) === 'stop_requested') {
      void stop.request();
    } else {
      log.warn(
        { details: ctx.cancellationDetails },
        'attempt cancelled without a cancel request; leaving the backend run to the next attempt',
      );
      lost.abort();
    }
  };
  ctx.cancellationSignal.addEventListener('abort', onCancel);
  if (ctx.cancellationSignal.aborted) onCancel();
  const beat = setInterval(() => ctx.heartbeat({ backendRunId, cursor: committer.cursor }), HEARTBEAT_EVERY_MS);
  consuming.runs += 1;

  try {
    let reconnects = 0;
    for (;;) {
      const streamAbort = new AbortController();
      const it = backend.streamEvents(backendRunId, committer.cursor, streamAbort.signal)[Symbol.asyncIterator]();
      // Each read starts before the event it follows is handled (commits await the database): marked handled at once,
      // so a stream that breaks meanwhile (a backend killed mid-turn) is no unhandled rejection; firstOf still sees it.
      const read = () => {
        const p = it.next();
        p.catch(() => undefined);
        return p;
      };
      let next: Promise<IteratorResult<RunEvent>> = read();
      try {
        for (;;) {
          const r = await firstOf(next, soonest(committer.dueIn(config.DELTA_DEBOUNCE_MS), stop.timeLeft()), lost.signal);
          if (r === LOST) throw attemptLostError(ctx);
          if (r === TIMER) {
            await committer.flush();
            if (stop.overdue()) return await stopWithoutTerminal(scope, backendRunId);
            continue;
          }
          if (r.done) break;
          next = read();
          const ev = r.value;
          if (committer.cursor !== null && Number(ev.id) <= Number(committer.cursor)) continue;
          reconnects = 0;
          if (ev.type === 'agent_message_delta') {
            committer.addDelta(ev.id, ev.data.delta);
            // The first text of a turn goes out at once (time to first token); later deltas are debounced.
            if (stop.requested || committer.noAnswerYet) await committer.flush();
            continue;
          }
          if (ev.type === 'pydantic_ai_event') {
            if (ev.data.event_kind === 'model_response') {
              const write = thoughts.modelCall(ev.data);
              if (write) committer.defer(write);
              continue;
            }
            // Files a tool left in the workspace are copied before the commit that references them (tool-files.ts).
            const files = await attachToolFiles(scope, ev.data, ev.id);
            const rows = thoughts.handle(files?.event ?? ev.data);
            if (rows.length > 0 || files)
              await committer.commit(ev.id, async (tx) => [
                ...((await files?.write(tx)) ?? []),
                ...(await thoughts.persist(tx, rows, ev.id)),
              ]);
            continue;
          }
          if (!isTerminalEvent(ev)) continue;
          const outcome = await endRun(scope, ev);
          // Stopped through Temporal: report the cancellation. Cancelled at the backend first (the api's fast
          // stop path): return `stopped` and the workflow, which also has the cancel request, ends Cancelled.
          if (stop.requested && outcome.status !== 'succeeded') throw new CancelledFailure('turn stopped');
          return outcome;
        }
      } catch (err) {
        if (err instanceof CancelledFailure || err instanceof FencedOut || isAttemptLost(err)) throw err;
        if (reconnects >= MAX_RECONNECTS) throw err;
        log.warn({ err: (err as Error).message, reconnects }, 'agent backend stream broke; reattaching from the committed cursor');
      } finally {
        streamAbort.abort();
        // An abandoned read rejects once its stream is aborted: nobody waits for it any more.
        next.catch(() => undefined);
      }
      // Stream ended without a terminal event: commit what we buffered, then reattach from the cursor.
      await committer.flush();
      reconnects += 1;
      const backoff = Math.min(2000, 100 * 2 ** reconnects);
      if ((await firstOf(new Promise<never>(() => undefined), backoff, lost.signal)) === LOST) throw attemptLostError(ctx);
    }
  } finally {
    consuming.runs -= 1;
    clearInterval(beat);
    ctx.cancellationSignal.removeEventListener('abort', onCancel);
  }
}

function soonest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b);
}

/** The next stream read, the timer (debounce window or stop deadline) or the attempt's loss, whichever comes first (loss wins ties). */
async function firstOf<T>(next: Promise<T>, ms: number | null, lost: AbortSignal): Promise<T | typeof TIMER | typeof LOST> {
  if (lost.aborted) return LOST;
  let timer: NodeJS.Timeout | undefined;
  let onLost: (() => void) | undefined;
  try {
    return await Promise.race([
      next,
      new Promise<typeof LOST>((resolve) => {
        onLost = () => resolve(LOST);
        lost.addEventListener('abort', onLost, { once: true });
      }),
      ...(ms === null ? [] : [new Promise<typeof TIMER>((resolve) => (timer = setTimeout(() => resolve(TIMER), ms)))]),
    ]);
  } finally {
    clearTimeout(timer);
    if (onLost) lost.removeEventListener('abort', onLost);
  }
}
