/**
 * runAgent (seed 000/001 AgentAppRunner.run + _consume_stream): creates the backend run (idempotency key
 * from the message id), consumes its events, debounces text deltas into `agent_message` events, records
 * thoughts, and handles the terminal event.
 *
 * Exactly-once without trusting the worker: every batch of effects (event-log rows, thought rows, answer
 * text, terminal bookkeeping) commits in one transaction together with the consumption cursor, fenced by
 * compare-and-set on that cursor. A retried attempt (worker killed, heartbeat timed out) resumes from the
 * committed cursor: nothing is lost, nothing is written twice. Heartbeats carry run id + cursor for ops.
 *
 * Stop is activity cancellation (delivered through heartbeats): flush, ask the backend to cancel, wait
 * (bounded) for its terminal event, persist snapshot + usage + partial answer, publish the partial
 * `message` and `message_end`, then report the cancellation.
 */
import crypto from 'node:crypto';
import { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import type { Prisma } from '../core/db.js';
import { turnEventBase, type NewClientEvent } from '../core/client-events.js';
import { appendEvents, commitAnswerText } from '../core/event-log.js';
import { unixSeconds } from '../core/time.js';
import { formFromArgs, newFormToken } from '../core/human-input.js';
import type { RunEvent, SessionSnapshot, Usage, CreateRunRequest } from '../core/protocol/run.js';
import { emptyUsage } from '../core/protocol/run.js';
import type { ActivityDeps } from '../turn/deps.js';
import { keywordHit } from '../turn/steps/input-guards.js';
import { ProcessRecorder, type ThoughtRow } from '../turn/process-recorder.js';

export type RunAgentOutcome =
  | { status: 'succeeded' }
  | { status: 'failed'; errorCode: string }
  | { status: 'stopped' }
  | { status: 'paused'; toolCallId: string; formId: string; formToken: string; expiresAt: string };

type Tx = Prisma.TransactionClient;

class FencedOut extends Error {
  constructor() {
    super('another attempt advanced this turn; this one stops');
  }
}

/** Failure classification (seed 001 _agent_backend_failure_to_exception): error_type first, then reason. */
export function classifyFailure(data: { error: string; error_type?: string | null; reason?: string | null }): { code: string; status: number; message: string } {
  if (data.error_type === 'agent_run_limit_exceeded') return { code: 'agent_run_limit_exceeded', status: 400, message: data.error };
  switch (data.reason) {
    case 'InvokeRateLimitError':
      return { code: 'rate_limit_error', status: 429, message: data.error };
    case 'InvokeAuthorizationError':
    case 'InvokeBadRequestError':
    case 'InvokeConnectionError':
    case 'InvokeServerUnavailableError':
    case 'InvokeError':
      return { code: 'completion_request_error', status: 400, message: data.error };
    case 'agent_llm_quota_exceeded':
      return { code: 'provider_quota_exceeded', status: 400, message: data.error };
    case 'run_timeout':
      return { code: 'agent_run_timeout', status: 504, message: data.error };
    default:
      return { code: 'completion_request_error', status: 400, message: data.error || 'The agent run failed.' };
  }
}

interface TurnFacts {
  messageId: string;
  conversationId: string;
  bindingId: string | null;
}

export function createRunAgent(deps: ActivityDeps) {
  const { db, backend, config, logger } = deps;

  return async function runAgent(input: { messageId: string }): Promise<RunAgentOutcome> {
    const ctx = Context.current();
    logger.debug({ message_id: input.messageId, attempt: ctx.info.attempt, scheduled_to_start_ms: Date.now() - ctx.info.currentAttemptScheduledTimestampMs }, 'runAgent started');
    const [msg, run] = await Promise.all([
      db.message.findUniqueOrThrow({ where: { id: input.messageId } }),
      db.agentBackendRun.findUnique({ where: { message_id: input.messageId } }),
    ]);
    if (!run) throw new Error(`no run request was built for message ${msg.id}`);
    const facts: TurnFacts = {
      messageId: msg.id,
      conversationId: msg.conversation_id,
      bindingId:
        run.binding_id ??
        (await db.conversation.findUniqueOrThrow({ where: { id: msg.conversation_id }, select: { agent_workspace_binding_id: true } })).agent_workspace_binding_id,
    };
    const log = logger.child({ tenant_id: msg.tenant_id, app_id: msg.app_id, conversation_id: msg.conversation_id, message_id: msg.id, workflow_id: ctx.info.workflowExecution?.workflowId, attempt: ctx.info.attempt });

    // Idempotent: a terminal already committed means an earlier attempt finished the work.
    if (run.terminal_type) {
      const form = await db.humanInputForm.findUnique({ where: { message_id: msg.id } });
      return outcomeOf(run.terminal_type, msg.error_code, form);
    }

    const eventBase = turnEventBase(msg);
    const base = <const T extends object>(extra: T) => ({ ...eventBase, ...extra });

    let cursor: string | null = run.cursor;
    let answer = msg.answer;
    // Thoughts are only written together with a cursor: a first attempt has none to read.
    const storedRows = cursor === null ? [] : await db.messageAgentThought.findMany({ where: { message_id: msg.id }, orderBy: { position: 'asc' } });
    const recorder = new ProcessRecorder(storedRows.map(toThoughtRow));
    let pendingText = '';
    let pendingFirstAt = 0;
    let pendingLastId: string | null = null;
    let stopRequested = ctx.cancellationSignal.aborted;
    let backendRunId = run.backend_run_id;

    // Stop before the backend run exists: create nothing afterwards.
    if (!backendRunId && stopRequested) {
      await commitTerminal(null, 'run_cancelled', async (tx) => {
        await tx.message.update({ where: { id: facts.messageId }, data: { status: 'stopped' } });
        return [
          { event: 'message', sourceKey: 'terminal:message', data: base({ event: 'message', id: facts.messageId, answer: msg.answer }) },
          { event: 'message_end', sourceKey: 'terminal:message_end', data: base({ event: 'message_end', id: facts.messageId, metadata: { usage: emptyUsage() } }) },
        ];
      });
      throw new CancelledFailure('stopped before the agent run started');
    }
    // The message turns `running` while the backend run is created (independent writes, one wait).
    const markRunning = msg.status === 'pending' ? db.message.update({ where: { id: msg.id }, data: { status: 'running' } }) : null;
    if (!backendRunId) {
      const [created] = await Promise.all([backend.createRun(run.request as unknown as CreateRunRequest), markRunning]);
      backendRunId = created.run_id;
      await db.agentBackendRun.update({ where: { message_id: facts.messageId }, data: { backend_run_id: backendRunId, status: 'running' } });
    } else {
      await markRunning;
    }

    log.info({ backend_run_id: backendRunId, cursor }, 'consuming agent run');
    ctx.heartbeat({ backendRunId, cursor });

    /** One transaction: effects + cursor CAS. */
    async function commit(newCursor: string, build: (tx: Tx) => Promise<NewClientEvent[]>): Promise<void> {
      await db.$transaction(async (tx) => {
        const n = await tx.$executeRaw`update agent_backend_runs set cursor = ${newCursor}, updated_at = now()
          where message_id = ${facts.messageId}::uuid and cursor is not distinct from ${cursor}`;
        if (n !== 1) throw new FencedOut();
        const events = await build(tx);
        await appendEvents(tx, facts.messageId, events);
      });
      cursor = newCursor;
      ctx.heartbeat({ backendRunId, cursor });
    }

    async function commitTerminal(newCursor: string | null, type: string, build: (tx: Tx) => Promise<NewClientEvent[]>): Promise<void> {
      await db.$transaction(async (tx) => {
        const n = await tx.$executeRaw`update agent_backend_runs set cursor = ${newCursor ?? cursor}, terminal_type = ${type}, status = 'ended', updated_at = now()
          where message_id = ${facts.messageId}::uuid and cursor is not distinct from ${cursor} and terminal_type is null`;
        if (n !== 1) throw new FencedOut();
        const events = await build(tx);
        await appendEvents(tx, facts.messageId, events);
        // The turn is over for the client the moment its terminal event is visible, so the conversation is
        // free in the same transaction (a paused turn keeps it: the form holds the conversation).
        const release = type === 'deferred_tool_call' ? {} : { active_message_id: null };
        await tx.conversation.updateMany({ where: { id: facts.conversationId, active_message_id: facts.messageId }, data: { updated_at: new Date(), ...release } });
      });
      if (newCursor) cursor = newCursor;
    }

    function pendingEvents(): NewClientEvent[] {
      if (!pendingText) return [];
      return [{ event: 'agent_message', sourceKey: `be:${pendingLastId}:agent_message`, data: base({ event: 'agent_message', id: facts.messageId, answer: pendingText }) }];
    }

    async function writePendingText(tx: Tx): Promise<NewClientEvent[]> {
      const events = pendingEvents();
      if (pendingText) await tx.$executeRaw`update messages set answer = answer || ${pendingText}, updated_at = now() where id = ${facts.messageId}::uuid`;
      return events;
    }

    function clearPending(): void {
      answer += pendingText;
      pendingText = '';
      pendingLastId = null;
      pendingFirstAt = 0;
    }

    async function flush(): Promise<void> {
      if (!pendingText || !pendingLastId) return;
      // The hot path (most commits of a streamed answer): cursor CAS + answer append + event, one statement.
      const [event] = pendingEvents();
      const ok = await commitAnswerText(db, { messageId: facts.messageId, expectedCursor: cursor, newCursor: pendingLastId, text: pendingText, event: event! });
      if (!ok) throw new FencedOut();
      cursor = pendingLastId;
      ctx.heartbeat({ backendRunId, cursor });
      clearPending();
    }

    /** Answer-row bookkeeping at a terminal (seed 001 trim_answer_suffix): trim, publish or drop the held row. */
    async function finishThoughts(tx: Tx, finalText: string, sourceId: string): Promise<NewClientEvent[]> {
      const { changed, removed } = recorder.finishAnswer(finalText);
      if (removed) await tx.messageAgentThought.deleteMany({ where: { id: removed.id } });
      return changed ? persistThoughts(tx, [changed], sourceId, true) : [];
    }

    /** Persists rows and publishes each as `agent_thought`, except a held answer row (see ProcessRecorder). */
    async function persistThoughts(tx: Tx, rows: ThoughtRow[], sourceId: string, publishHeld = false): Promise<NewClientEvent[]> {
      const out: NewClientEvent[] = [];
      for (const r of rows) {
        const data = {
          thought: r.thought,
          tool: r.tool,
          tool_labels: r.tool_labels as Prisma.InputJsonValue,
          tool_input: r.tool_input,
          observation: r.observation,
          tool_call_id: r.tool_call_id,
          part_index: r.part_index,
          message_files: r.message_files,
        };
        await tx.messageAgentThought.upsert({
          where: { message_id_position: { message_id: facts.messageId, position: r.position } },
          create: { id: r.id, message_id: facts.messageId, position: r.position, kind: r.kind, ...data },
          update: data,
        });
        if (!publishHeld && recorder.isHeld(r)) continue;
        out.push({
          event: 'agent_thought',
          sourceKey: `be:${sourceId}:thought:${r.position}`,
          data: base({
            event: 'agent_thought',
            id: r.id,
            position: r.position,
            thought: r.thought,
            observation: r.observation,
            tool: r.tool,
            tool_labels: r.tool_labels,
            tool_input: r.tool_input,
            message_files: r.message_files,
          }),
        });
      }
      return out;
    }

    async function saveUsageAndSnapshot(tx: Tx, usage: Usage | null | undefined, snapshot: SessionSnapshot | null | undefined): Promise<void> {
      if (usage) {
        await tx.message.update({
          where: { id: facts.messageId },
          data: {
            message_tokens: usage.prompt_tokens,
            answer_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            message_unit_price: usage.prompt_unit_price,
            message_price_unit: usage.prompt_price_unit,
            answer_unit_price: usage.completion_unit_price,
            answer_price_unit: usage.completion_price_unit,
            total_price: usage.total_price,
            currency: usage.currency,
            provider_response_latency: usage.latency,
            time_to_first_token: usage.time_to_first_token,
            usage: usage as unknown as Prisma.InputJsonValue,
          },
        });
      }
      // A null snapshot leaves the stored one untouched (seed 001).
      if (snapshot && facts.bindingId) {
        await tx.agentWorkspaceBinding.update({ where: { id: facts.bindingId }, data: { session_snapshot: snapshot as unknown as Prisma.InputJsonValue } });
      }
    }

    function usageOf(u: Usage | null | undefined): Usage {
      return u ?? emptyUsage();
    }

    async function handleTerminal(ev: RunEvent): Promise<RunAgentOutcome> {
      const pendingEvs = () => pendingEvents();
      if (ev.type === 'run_succeeded') {
        const d = ev.data;
        if (d.deferred_tool_call) {
          // ask_human pause (seed 000 _pause_for_ask_human): a form keyed by the message id, the pause
          // correlation on the binding, and the agent's question as this turn's answer.
          const call = d.deferred_tool_call;
          const form = formFromArgs(call.args);
          const formId = crypto.randomUUID();
          const formToken = newFormToken();
          const expiresAt = new Date(Date.now() + config.HUMAN_INPUT_FORM_EXPIRY_HOURS * 3_600_000);
          const answerText = [answer + pendingText, form.question].filter(Boolean).join('\n\n');
          await commitTerminal(ev.id, 'deferred_tool_call', async (tx) => {
            const evs = [...pendingEvs(), ...(await finishThoughts(tx, answerText, ev.id))];
            await saveUsageAndSnapshot(tx, d.usage, d.session_snapshot);
            await tx.humanInputForm.create({
              data: {
                id: formId,
                tenant_id: msg.tenant_id,
                app_id: msg.app_id,
                conversation_id: facts.conversationId,
                message_id: facts.messageId,
                end_user_id: msg.end_user_id,
                node_id: facts.messageId,
                token: formToken,
                title: form.title ?? 'The agent needs your input',
                question: form.question,
                markdown: form.markdown ?? '',
                fields: form.fields as unknown as Prisma.InputJsonValue,
                actions: form.actions as unknown as Prisma.InputJsonValue,
                urgency: form.urgency,
                workflow_id: msg.workflow_id,
                tool_call_id: call.tool_call_id,
                expires_at: expiresAt,
              },
            });
            if (facts.bindingId) {
              await tx.agentWorkspaceBinding.update({
                where: { id: facts.bindingId },
                data: { pending_form_id: formId, pending_tool_call_id: call.tool_call_id, pending_message_id: facts.messageId },
              });
            }
            await tx.message.update({ where: { id: facts.messageId }, data: { status: 'paused', answer: answerText } });
            return [
              ...evs,
              { event: 'message', sourceKey: 'terminal:message', data: base({ event: 'message', id: facts.messageId, answer: answerText }) },
              {
                event: 'human_input_required',
                sourceKey: 'terminal:human_input_required',
                data: base({
                  event: 'human_input_required',
                  data: {
                    form_id: formId,
                    form_token: formToken,
                    node_id: facts.messageId,
                    node_title: form.title ?? 'The agent needs your input',
                    form_content: [form.question, form.markdown].filter(Boolean).join('\n\n'),
                    inputs: form.fields,
                    actions: form.actions,
                    expiration_time: unixSeconds(expiresAt),
                  },
                }),
              },
              { event: 'message_end', sourceKey: 'terminal:message_end', data: base({ event: 'message_end', id: facts.messageId, metadata: { usage: usageOf(d.usage) } }) },
            ];
          });
          clearPending();
          return { status: 'paused', toolCallId: call.tool_call_id, formId, formToken, expiresAt: expiresAt.toISOString() };
        }
        let finalAnswer = d.output ?? answer + pendingText;
        // Output moderation (seed 000's pipeline): a flagged answer is replaced, and clients are told.
        const moderation = run!.output_moderation as { keywords: string[]; preset_answer: string } | null;
        const flagged = moderation ? keywordHit(moderation.keywords, [finalAnswer]) : null;
        if (moderation && flagged) finalAnswer = moderation.preset_answer;
        await commitTerminal(ev.id, 'run_succeeded', async (tx) => {
          const evs = [...pendingEvs(), ...(await finishThoughts(tx, finalAnswer, ev.id))];
          await saveUsageAndSnapshot(tx, d.usage, d.session_snapshot);
          await tx.message.update({ where: { id: facts.messageId }, data: { answer: finalAnswer, status: 'succeeded', error: null } });
          return [
            ...evs,
            ...(flagged
              ? [{ event: 'message_replace' as const, sourceKey: 'terminal:message_replace', data: base({ event: 'message_replace', answer: finalAnswer, reason: 'output_moderation' }) }]
              : []),
            { event: 'message', sourceKey: 'terminal:message', data: base({ event: 'message', id: facts.messageId, answer: finalAnswer }) },
            { event: 'message_end', sourceKey: 'terminal:message_end', data: base({ event: 'message_end', id: facts.messageId, metadata: { usage: usageOf(d.usage) } }) },
          ];
        });
        clearPending();
        return { status: 'succeeded' };
      }
      if (ev.type === 'run_cancelled') {
        const d = ev.data;
        await commitTerminal(ev.id, 'run_cancelled', async (tx) => {
          const partial = answer + pendingText;
          const evs = [...(await writePendingText(tx)), ...(await finishThoughts(tx, partial, ev.id))];
          await saveUsageAndSnapshot(tx, d.usage, d.session_snapshot);
          await tx.message.update({ where: { id: facts.messageId }, data: { status: 'stopped', answer: partial } });
          return [
            ...evs,
            { event: 'message', sourceKey: 'terminal:message', data: base({ event: 'message', id: facts.messageId, answer: partial }) },
            { event: 'message_end', sourceKey: 'terminal:message_end', data: base({ event: 'message_end', id: facts.messageId, metadata: { usage: usageOf(d.usage) } }) },
          ];
        });
        clearPending();
        return { status: 'stopped' };
      }
      if (ev.type === 'run_failed') {
        const d = ev.data;
        const err = classifyFailure(d);
        await commitTerminal(ev.id, 'run_failed', async (tx) => {
          const evs = [...(await writePendingText(tx)), ...(await finishThoughts(tx, answer + pendingText, ev.id))];
          await saveUsageAndSnapshot(tx, d.usage, d.session_snapshot);
          await tx.message.update({ where: { id: facts.messageId }, data: { status: 'failed', error: err.message, error_code: err.code } });
          return [...evs, { event: 'error', sourceKey: 'terminal:error', data: base({ event: 'error', status: err.status, code: err.code, message: err.message }) }];
        });
        clearPending();
        return { status: 'failed', errorCode: err.code };
      }
      throw new Error(`not a terminal event: ${ev.type}`);
    }

    // --- stop handling ---------------------------------------------------------------------------
    let cancelSent = false;
    let stopDeadline = Infinity;
    const requestStop = async () => {
      if (cancelSent || !backendRunId) return;
      cancelSent = true;
      stopDeadline = Date.now() + config.STOP_WAIT_MS;
      try {
        const r = await backend.cancelRun(backendRunId, { reason: 'user_stop', message: 'Stopped by the user.' });
        log.info({ ended: r.ended }, 'backend cancel requested');
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'backend cancel failed; waiting for the run to end anyway');
      }
    };
    const onCancel = () => {
      stopRequested = true;
      void requestStop();
    };
    ctx.cancellationSignal.addEventListener('abort', onCancel);
    if (stopRequested) void requestStop();
    const beat = setInterval(() => ctx.heartbeat({ backendRunId, cursor }), 1000);

    try {
      let reconnects = 0;
      for (;;) {
        const streamAbort = new AbortController();
        const it = backend.streamEvents(backendRunId, cursor, streamAbort.signal)[Symbol.asyncIterator]();
        const TIMER = Symbol('timer');
        try {
          let next = it.next();
          for (;;) {
            const waitFor = pendingText ? Math.max(0, pendingFirstAt + config.DELTA_DEBOUNCE_MS - Date.now()) : null;
            const stopLeft = stopDeadline === Infinity ? null : Math.max(0, stopDeadline - Date.now());
            const timeout = waitFor === null ? stopLeft : stopLeft === null ? waitFor : Math.min(waitFor, stopLeft);
            let timer: NodeJS.Timeout | undefined;
            const r = timeout === null ? await next : await Promise.race([next, new Promise<typeof TIMER>((res) => (timer = setTimeout(() => res(TIMER), timeout)))]);
            if (timer) clearTimeout(timer);
            if (r === TIMER) {
              await flush();
              if (stopDeadline !== Infinity && Date.now() >= stopDeadline) return await stopWithoutTerminal();
              continue;
            }
            if (r.done) break;
            next = it.next();
            const ev = r.value;
            if (cursor !== null && Number(ev.id) <= Number(cursor)) continue;
            reconnects = 0;
            if (ev.type === 'agent_message_delta') {
              if (!pendingText) pendingFirstAt = Date.now();
              pendingText += ev.data.delta;
              pendingLastId = ev.id;
              // The first text of a turn goes out at once (time to first token); later deltas are debounced.
              if (stopRequested || answer === '') await flush();
              continue;
            }
            if (ev.type === 'pydantic_ai_event') {
              const held = recorder.heldAnswer();
              const rows = recorder.handle(ev.data);
              // A held answer row followed by another row was not the final answer: release it to clients.
              if (held && !recorder.isHeld(held) && !rows.includes(held)) rows.unshift(held);
              if (rows.length === 0) continue;
              await commit(ev.id, async (tx) => [...(await writePendingText(tx)), ...(await persistThoughts(tx, rows, ev.id))]);
              clearPending();
              continue;
            }
            if (ev.type === 'run_started') continue;
            const outcome = await handleTerminal(ev);
            // Cancelled through Temporal: report the cancellation. Cancelled at the backend first (the api's
            // fast stop path): return `stopped` and the workflow, which also has the cancel request, ends Cancelled.
            if (ctx.cancellationSignal.aborted && outcome.status !== 'succeeded') throw new CancelledFailure('turn stopped');
            return outcome;
          }
        } catch (err) {
          if (err instanceof CancelledFailure || err instanceof FencedOut) throw err;
          if (reconnects >= 5) throw err;
          log.warn({ err: (err as Error).message, reconnects }, 'agent backend stream broke; reattaching from the committed cursor');
        } finally {
          streamAbort.abort();
        }
        // Stream ended without a terminal event: commit what we buffered, then reattach from the cursor.
        await flush();
        reconnects += 1;
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** reconnects)));
      }
    } finally {
      clearInterval(beat);
      ctx.cancellationSignal.removeEventListener('abort', onCancel);
    }

    async function stopWithoutTerminal(): Promise<never> {
      // The backend did not confirm within STOP_WAIT_MS: keep what we have, snapshot untouched.
      await commitTerminal(null, 'stop_timeout', async (tx) => {
        const partial = answer + pendingText;
        const evs = [...(await writePendingText(tx)), ...(await finishThoughts(tx, partial, 'stop'))];
        await tx.message.update({ where: { id: facts.messageId }, data: { status: 'stopped', answer: partial } });
        return [
          ...evs,
          { event: 'message', sourceKey: 'terminal:message', data: base({ event: 'message', id: facts.messageId, answer: partial }) },
          { event: 'message_end', sourceKey: 'terminal:message_end', data: base({ event: 'message_end', id: facts.messageId, metadata: { usage: emptyUsage() } }) },
        ];
      });
      clearPending();
      throw new CancelledFailure('turn stopped (backend did not confirm in time)');
    }
  };
}

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
      return { status: 'paused', toolCallId: form.tool_call_id, formId: form.id, formToken: form.token, expiresAt: form.expires_at.toISOString() };
    case 'run_failed':
      return { status: 'failed', errorCode: errorCode ?? 'completion_request_error' };
    default:
      return { status: 'stopped' };
  }
}

function toThoughtRow(r: {
  id: string;
  position: number;
  kind: string;
  thought: string;
  tool: string;
  tool_labels: unknown;
  tool_input: string;
  observation: string;
  tool_call_id: string | null;
  part_index: number | null;
  message_files: unknown;
}): ThoughtRow {
  return {
    id: r.id,
    position: r.position,
    kind: r.kind as ThoughtRow['kind'],
    thought: r.thought,
    tool: r.tool,
    tool_labels: (r.tool_labels ?? {}) as Record<string, unknown>,
    tool_input: r.tool_input,
    observation: r.observation,
    tool_call_id: r.tool_call_id,
    part_index: r.part_index,
    message_files: (r.message_files ?? []) as string[],
    closed: r.observation !== '',
  };
}
