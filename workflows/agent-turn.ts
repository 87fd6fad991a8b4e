/**
 * agentTurn: one conversation turn as a durable workflow (docs/ARCHITECTURE.md "One turn").
 * The workflow decides; activities do all I/O and keep big data (snapshots, answers, thoughts) in
 * PostgreSQL, so history holds ids and small outcomes only. Stop is cancellation: cleanup runs in
 * non-cancellable scopes and the workflow then ends Cancelled.
 */
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities, RunAgentOutcome } from '../activities/index.js';
import type { TurnErrorDetails } from '../activities/errors.js';
import { TURN_SEARCH_ATTRIBUTES } from '../core/protocol/workflow-contract.js';
import { AGENT_RUN_OPTIONS, TURN_STEP_OPTIONS } from './turn-activity-options.js';
import {
  formSubmittedSignal,
  turnStateQuery,
  type FormSubmittedSignal,
  type AgentTurnInput,
  type AgentTurnResult,
  type TurnState,
} from './definitions.js';

/** Database steps as local activities, the agent run as a heartbeating activity (workflows/turn-activity-options.ts). */
const steps = proxyLocalActivities<Activities>(TURN_STEP_OPTIONS);
const agent = proxyActivities<Activities>(AGENT_RUN_OPTIONS);

/** Client-facing error of a failed step (turnFailure details), else a generic one. */
function errorDetails(err: unknown): TurnErrorDetails {
  let cur: unknown = err;
  while (cur && typeof cur === 'object') {
    if (cur instanceof ApplicationFailure && cur.details?.[0] && typeof cur.details[0] === 'object') {
      const d = cur.details[0] as Partial<TurnErrorDetails>;
      if (d.code && d.status && d.message) return { code: d.code, status: d.status, message: d.message };
    }
    cur = (cur as { cause?: unknown }).cause;
  }
  return { code: 'internal_server_error', status: 500, message: 'The agent turn failed unexpectedly.' };
}

/**
 * A failed turn ends as a failed workflow (issue 42): once its outcome is stored (the message failed, its error event
 * written, the conversation free), the workflow fails with a non-retryable ApplicationFailure whose type is the turn's
 * error code, so the Temporal UI's badge, its "Failures" count and `ExecutionStatus = 'Failed'` see it
 * (docs/operations.md). A stop still ends Cancelled (or Completed when the run ended first). Patched: a turn started
 * before this change that fails replays to its completed result.
 */
const FAILED_TURN_FAILS_WORKFLOW = 'failed-turn-fails-workflow';

/** The patch of shape 2 (see runTurn). */
const TURN_SHAPE_2 = 'turn-shape-2';

function turnFailed(messageId: string, code: string, message?: string): ApplicationFailure {
  return ApplicationFailure.create({
    message: message ? `turn failed (${code}): ${message}` : `turn failed (${code})`,
    type: code,
    nonRetryable: true,
    details: [{ status: 'failed', messageId, errorCode: code }],
  });
}

export async function agentTurn(input: AgentTurnInput): Promise<AgentTurnResult> {
  let failure: ApplicationFailure | undefined;
  const result = await runTurn(input, (f) => (failure = f));
  if (failure) throw failure;
  return result;
}

async function runTurn(input: AgentTurnInput, fail: (f: ApplicationFailure) => void): Promise<AgentTurnResult> {
  const { conversationId } = input;
  // Shape 2 (issue 40 item 4), one patch for all the changes below: a turn started on this code records one marker
  // (and the SDK's one TemporalChangeVersion update) and takes every patched path without asking again — three
  // markers and three visibility updates per turn before. It upserts TurnStatus once at its end (with a continuation's
  // MessageIds, not apart) and runs no release step after a terminal that runAgent committed with the release. A turn
  // started before finds no marker at this point and decides each change with patched() where it did (its history
  // replays as recorded). Removal: docs/operations.md "Upgrading with turns in flight".
  const shaped = patched(TURN_SHAPE_2);
  const has = (patchId: string) => shaped || patched(patchId);
  // The message being worked on: the turn's own, then each ask_human continuation's.
  let messageId = input.messageId;
  const touched = [messageId];
  const state: TurnState = { phase: 'resolving_config', messageId, pendingFormId: null, pendingFormToken: null };
  let submitted: FormSubmittedSignal | null = null;
  // The form exists (and its token reaches the client) before runAgent's completion is processed, so a
  // submission can be signalled before the workflow knows the form id: a fast human, or a worker that was
  // down when runAgent completed (the signal then lands in the same activation, and signals are handled
  // first). Such early submissions are kept by form id instead of dropped. Patched: workflows started
  // before this change replay with the old handler.
  const keepEarly = has('keep-early-form-submissions');
  const early = new Map<string, FormSubmittedSignal>();
  setHandler(turnStateQuery, () => state);
  setHandler(formSubmittedSignal, (s) => {
    if (s.formId === state.pendingFormId) submitted = s;
    else if (keepEarly && early.size < 16 && !early.has(s.formId)) early.set(s.formId, s);
  });
  // The Temporal UI shows this under "current details": ops see where a turn is without a query.
  const enter = (phase: TurnState['phase'], extra = '') => {
    state.phase = phase;
    setCurrentDetails(`phase: ${phase}${extra}`);
  };

  // The outcome as search attributes (TurnStatus, ErrorCode: docs/operations.md), so ops find failed turns with one
  // query. Only where the turn was started with TurnStatus (a namespace that lacks it would fail every workflow task);
  // patched: workflows started before replay without the upserts.
  const recordOutcome = (status: string, errorCode?: string) => {
    if (workflowInfo().typedSearchAttributes.get(TURN_SEARCH_ATTRIBUTES.TurnStatus) === undefined || !has('turn-outcome-attributes'))
      return;
    upsertSearchAttributes([
      { key: TURN_SEARCH_ATTRIBUTES.TurnStatus, value: status },
      ...(errorCode ? [{ key: TURN_SEARCH_ATTRIBUTES.ErrorCode, value: errorCode }] : []),
    ]);
  };

  // The turn's preparation runs inside runAgent, so the first workflow task only schedules it (issue 21 direction 2:
  // one activation and the local activity's dispatch less before the first token). Turns started before keep the
  // local activity for their whole life, continuations included.
  const prepareInRunAgent = has('prepare-in-run-agent');
  // Shape 2: a terminal outcome of runAgent was committed together with the conversation's release (commit.ts
  // commitTerminal, the guards, the api or the sweeper for a message ended before it), so `finally` releases nothing
  // more then: a local activity and two statements less per turn. Failures and stops still release every message.
  let releasedByRun = false;
  try {
    let resumeFormId: string | undefined;
    for (;;) {
      // resolveConfig → inputGuards (fresh turns only, never an ask_human continuation: docs/seeds/000) →
      // loadOrCreateBinding → buildRunRequest: inside runAgent, or (older turns) one local activity before it.
      const prepare = { runGuards: !resumeFormId && !input.resumeOfMessageId, resumeFormId };
      let outcome: RunAgentOutcome;
      if (prepareInRunAgent) {
        enter('running_agent');
        outcome = await agent.runAgent({ messageId, prepare });
      } else {
        enter('resolving_config');
        const prepared = await steps.prepareTurn({ messageId, ...prepare });
        if (prepared.guard) outcome = { status: 'answered_by_guard', guard: prepared.guard };
        else {
          enter('running_agent');
          outcome = await agent.runAgent({ messageId });
        }
      }
      releasedByRun = shaped && outcome.status !== 'paused';
      if (outcome.status === 'answered_by_guard') {
        enter('completed', ` · answered by ${outcome.guard}`);
        recordOutcome('answered_by_guard');
        return { status: 'answered_by_guard', messageId };
      }
      if (outcome.status === 'succeeded') {
        enter('completed');
        recordOutcome('succeeded');
        return { status: 'succeeded', messageId };
      }
      if (outcome.status === 'failed') {
        enter('failed');
        recordOutcome('failed', outcome.errorCode);
        // runAgent stored the outcome (terminal.ts / refused.ts); the workflow fails after the release below.
        if (has(FAILED_TURN_FAILS_WORKFLOW)) fail(turnFailed(messageId, outcome.errorCode));
        return { status: 'failed', messageId, errorCode: outcome.errorCode };
      }
      if (outcome.status === 'stopped') {
        enter('stopped');
        recordOutcome('stopped');
        // A user stop: the cancel request is in history before the run's end, so end Cancelled.
        if (CancellationScope.current().consideredCancelled) throw new CancelledFailure('turn stopped');
        return { status: 'stopped', messageId };
      }
      // ask_human: wait durably for the form (signal) or its expiry (timer); days are fine.
      state.pendingFormId = outcome.formId;
      state.pendingFormToken = outcome.formToken;
      submitted = early.get(outcome.formId) ?? null;
      early.clear();
      enter('waiting_for_human', ` · form ${outcome.formId}`);
      recordOutcome('waiting_for_human');
      const waitMs = Math.max(0, new Date(outcome.expiresAt).getTime() - Date.now());
      // The timer's summary names the form (the UI showed a bare timer id); metadata is not replayed.
      const got = await condition(() => submitted !== null, waitMs, { summary: `form ${outcome.formId} expires` });
      let resumeMessageId: string;
      if (got && submitted) {
        resumeMessageId = (submitted as FormSubmittedSignal).resumeMessageId;
      } else {
        const expiry = await steps.expireForm({ formId: outcome.formId });
        if (expiry.status === 'submitted' && expiry.resumeMessageId) {
          resumeMessageId = expiry.resumeMessageId;
        } else {
          resumeMessageId = uuid4();
          await steps.createTimeoutResume({ pausedMessageId: messageId, formId: outcome.formId, resumeMessageId });
        }
      }
      resumeFormId = outcome.formId;
      if (!shaped) recordOutcome('running');
      state.pendingFormId = null;
      state.pendingFormToken = null;
      messageId = resumeMessageId;
      state.messageId = messageId;
      touched.push(messageId);
      // Ops find a continuation by its own message id too (MessageId stays the turn's first message). Only where
      // the turn was started with MessageIds: upserting an attribute the namespace lacks fails every workflow task.
      const hasMessageIds = workflowInfo().typedSearchAttributes.get(TURN_SEARCH_ATTRIBUTES.MessageIds) !== undefined;
      if (shaped) {
        // Shape 2: the status and the continuation's id in one visibility update.
        const hasStatus = workflowInfo().typedSearchAttributes.get(TURN_SEARCH_ATTRIBUTES.TurnStatus) !== undefined;
        const pairs = [
          ...(hasStatus ? [{ key: TURN_SEARCH_ATTRIBUTES.TurnStatus, value: 'running' }] : []),
          ...(hasMessageIds ? [{ key: TURN_SEARCH_ATTRIBUTES.MessageIds, value: [...touched] }] : []),
        ];
        if (pairs.length > 0) upsertSearchAttributes(pairs);
      } else if (hasMessageIds && patched('continuation-message-ids')) {
        upsertSearchAttributes([{ key: TURN_SEARCH_ATTRIBUTES.MessageIds, value: [...touched] }]);
      }
    }
  } catch (err) {
    if (isCancellation(err)) {
      enter('stopped');
      recordOutcome('stopped');
      const formId = state.pendingFormId;
      await CancellationScope.nonCancellable(async () => {
        if (formId) await steps.cancelPendingForm({ formId, messageId });
        else await steps.stopTurn({ messageId });
      });
      throw err;
    }
    const details = errorDetails(err);
    enter('failed');
    recordOutcome('failed', details.code);
    await CancellationScope.nonCancellable(() => steps.failTurn({ messageId, ...details }));
    if (has(FAILED_TURN_FAILS_WORKFLOW)) fail(turnFailed(messageId, details.code, details.message));
    return { status: 'failed', messageId, errorCode: details.code };
  } finally {
    if (!releasedByRun)
      await CancellationScope.nonCancellable(async () => {
        for (const id of touched) await steps.releaseTurn({ conversationId, messageId: id });
      });
  }
}
