/**
 * runAgent (docs/seeds/000 and 001 AgentAppRunner.run): creates the backend run (idempotency key from the message id)
 * or reattaches to it, then consumes its events until its end. Rooms: consume.ts (the loop: heartbeat,
 * debounce, reconnect, stop), commit.ts (cursor-fenced commits), thoughts.ts (thought rows), terminal.ts and
 * pause.ts (how a run ends), refused.ts (a run the backend refused to create: failed at once, never retried),
 * cancellation.ts (a user's stop versus a lost attempt).
 *
 * Exactly-once without trusting the worker: every effect commits with the run's consumption cursor, so a
 * retried attempt (worker killed, heartbeat timed out, Temporal unreachable) resumes from the committed
 * cursor: nothing is lost, nothing is written twice. Heartbeats carry run id + cursor for ops.
 */
import { Context } from '@temporalio/activity';
import type { CreateRunRequest } from '../../core/protocol/run.js';
import type { ActivityDeps } from '../deps.js';
import type { AgentBackendRun, Message } from '../../core/generated/prisma/client.js';
import { readTurnContext } from '../prepare/turn-context.js';
import { createTurnPreparation } from '../prepare/index.js';
import { attemptLostError, cancellationCause } from './cancellation.js';
import { RunCommitter } from './commit.js';
import { consumeRun } from './consume.js';
import { createRunOrRefusal, refuseRun } from './refused.js';
import type { RunAgentOutcome, RunScope } from './scope.js';
import { stopBeforeStart } from './terminal.js';
import { ThoughtLog } from './thoughts.js';

export type { RunAgentOutcome } from './scope.js';

export function createRunAgent(deps: ActivityDeps) {
  const { db, backend, logger } = deps;
  const prepare = createTurnPreparation(deps);

  return async function runAgent(input: {
    messageId: string;
    /**
     * Set by turns started with the `prepare-in-run-agent` patch: the turn's preparation (prepareTurn's steps) runs
     * here instead of in a local activity of the first workflow task, so that task only schedules this activity
     * (issue 21 direction 2). Skipped once the run request exists: buildRunRequest writes it in the preparation's last
     * transaction, so a retried attempt (a failed POST /runs, a lost worker) uses the request as built, exactly as a
     * runAgent retry after a completed prepareTurn did.
     */
    prepare?: { runGuards: boolean; resumeFormId?: string };
  }): Promise<RunAgentOutcome> {
    const ctx = Context.current();
    // One round of reads; a turn whose run request is not built yet is prepared from it (and the preparation hands
    // back the message and run row it wrote, so nothing is read twice). A request built by an earlier attempt is used
    // as built.
    const first = await readTurnContext(db, input.messageId);
    let [msg, run]: [Message, AgentBackendRun | null] = [first.msg, first.existingRun];
    // Ended before any run committed a terminal: the api marked it failed after a start it thought refused, or the
    // turn sweeper ended it (worker/sweeper.ts). Its terminal event is out; nothing more is done for it.
    if (!run?.terminal_type && (msg.status === 'failed' || msg.status === 'stopped')) {
      logger.warn({ message_id: msg.id, status: msg.status }, 'runAgent: the message already ended; nothing to run');
      return msg.status === 'failed' ? { status: 'failed', errorCode: msg.error_code ?? 'internal_server_error' } : { status: 'stopped' };
    }
    if (!run && input.prepare) {
      const prepared = await prepare({ messageId: input.messageId, ...input.prepare }, { first });
      if (prepared.guard) return { status: 'answered_by_guard', guard: prepared.guard };
      ({ msg, run } = prepared);
    }
    logger.debug(
      {
        message_id: input.messageId,
        attempt: ctx.info.attempt,
        scheduled_to_start_ms: Date.now() - ctx.info.currentAttemptScheduledTimestampMs,
      },
      'runAgent started',
    );
    if (!run) throw new Error(`no run request was built for message ${msg.id}`);
    const log = logger.child({
      tenant_id: msg.tenant_id,
      app_id: msg.app_id,
      conversation_id: msg.conversation_id,
      message_id: msg.id,
      workflow_id: ctx.info.workflowExecution?.workflowId,
      attempt: ctx.info.attempt,
    });

    // Idempotent: a terminal already committed means an earlier attempt finished the work.
    if (run.terminal_type) {
      const form = await db.humanInputForm.findUnique({ where: { message_id: msg.id } });
      return outcomeOf(run.terminal_type, msg.error_code, form);
    }

    const bindingId =
      run.binding_id ??
      (await db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id }, select: { agent_workspace_binding_id: true } }))
        .agent_workspace_binding_id;
    let backendRunId = run.backend_run_id;
    const committer = new RunCommitter(db, msg, { cursor: run.cursor, answer: msg.answer }, (cursor) =>
      ctx.heartbeat({ backendRunId, cursor }),
    );
    const thoughts = await ThoughtLog.load(db, msg, run.cursor);
    const scope: RunScope = { deps, ctx, log, msg, run, bindingId, committer, thoughts };

    const cancelled = cancellationCause(ctx);
    if (cancelled === 'attempt_lost') throw attemptLostError(ctx);
    // Stop before the backend run exists: create nothing afterwards.
    if (!backendRunId && cancelled === 'stop_requested') return stopBeforeStart(scope);

    if (!backendRunId) {
      const created = await createRunOrRefusal(backend, run.request as unknown as CreateRunRequest);
      if ('refused' in created) return refuseRun(scope, created.refused);
      backendRunId = created.run_id;
      // The run id and the message turning `running`, in one statement (one transaction instead of two).
      await db.$executeRaw`
        with run as (
          update agent_backend_runs set backend_run_id = ${backendRunId}, status = 'running', updated_at = now()
           where message_id = ${msg.id}::uuid
        )
        update messages set status = 'running', updated_at = now() where id = ${msg.id}::uuid and status = 'pending'`;
    } else if (msg.status === 'pending') {
      await db.message.update({ where: { id: msg.id }, data: { status: 'running' } });
    }

    log.info({ backend_run_id: backendRunId, cursor: committer.cursor }, 'consuming agent run');
    ctx.heartbeat({ backendRunId, cursor: committer.cursor });
    return consumeRun(scope, backendRunId);
  };
}

/** The outcome of a run whose terminal an earlier attempt committed. */
function outcomeOf(
  type: string,
  errorCode: string | null,
  form: { id: string; token: string; tool_call_id: string; expires_at: Date } | null,
): RunAgentOutcome {
  switch (type) {
    case 'run_succeeded':
      return { status: 'succeeded' };
    case 'deferred_tool_call':
      if (!form) throw new Error('paused turn without its form');
      return {
        status: 'paused',
        toolCallId: form.tool_call_id,
        formId: form.id,
        formToken: form.token,
        expiresAt: form.expires_at.toISOString(),
      };
    case 'run_failed':
      return { status: 'failed', errorCode: errorCode ?? 'completion_request_error' };
    default:
      return { status: 'stopped' };
  }
}
