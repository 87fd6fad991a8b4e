/**
 * How a run ends, each in one commit with its cursor and terminal type: succeeded (output moderation may
 * replace the answer), paused for ask_human (pause.ts), cancelled by the backend, failed, and a stop the
 * backend did not confirm in time (or before any run existed). The final client events come from
 * activities/final-events.ts, as for every other producer.
 */
import { bucketOf } from '../../core/domain/workspace-bucket.js';
import path from 'node:path';
import { CancelledFailure } from '@temporalio/common';
import { removeTree } from '../../core/domain/workspace-tree.js';
import { removeMarker } from '../../core/domain/workspace-marker.js';
import type { RunEvent, SessionSnapshot, Usage } from '../../core/protocol/run.js';
import { classifyFailure } from '../classify-failure.js';
import { turnCitations } from '../citations.js';
import { errorEvents, finalAnswerEvents } from '../final-events.js';
import { keywordHit } from '../prepare/input-guards.js';
import type { Tx } from './commit.js';
import { pauseForHuman } from './pause.js';
import type { RunAgentOutcome, RunScope } from './scope.js';
import { saveUsageAndSnapshot } from './usage.js';

type TerminalEvent = Extract<RunEvent, { type: 'run_succeeded' | 'run_failed' | 'run_cancelled' }>;

export function isTerminalEvent(ev: RunEvent): ev is TerminalEvent {
  return ev.type === 'run_succeeded' || ev.type === 'run_failed' || ev.type === 'run_cancelled';
}

export async function endRun(scope: RunScope, ev: TerminalEvent): Promise<RunAgentOutcome> {
  switch (ev.type) {
    case 'run_succeeded':
      return ev.data.deferred_tool_call
        ? pauseForHuman(scope, ev.id, ev.data, ev.data.deferred_tool_call)
        : succeeded(scope, ev.id, ev.data);
    case 'run_cancelled':
      return cancelled(scope, ev);
    case 'run_failed':
      return failed(scope, ev);
  }
}

async function succeeded(
  scope: RunScope,
  eventId: string,
  d: { output?: string; usage: Usage; session_snapshot: SessionSnapshot },
): Promise<RunAgentOutcome> {
  const { committer, thoughts, msg } = scope;
  let answer = d.output ?? committer.streamedAnswer;
  // Output moderation (docs/seeds/000's pipeline): a flagged answer is replaced, and clients are told.
  const moderation = scope.run.output_moderation as { keywords: string[]; preset_answer: string } | null;
  const flagged = moderation ? keywordHit(moderation.keywords, [answer]) !== null : false;
  if (moderation && flagged) answer = moderation.preset_answer;
  await committer.commitTerminal(eventId, 'run_succeeded', async (tx) => {
    const streamed = [...committer.pendingEvents(), ...(await thoughts.finish(tx, answer, eventId))];
    await saveUsageAndSnapshot(scope, tx, d.usage, d.session_snapshot, { answer, status: 'succeeded', error: null });
    const retrieverResources = await turnCitations(tx, msg);
    return [
      ...streamed,
      ...finalAnswerEvents(msg, { answer, usage: d.usage, replacedBy: flagged ? 'output_moderation' : undefined, retrieverResources }),
    ];
  });
  return { status: 'succeeded' };
}

async function cancelled(scope: RunScope, ev: Extract<TerminalEvent, { type: 'run_cancelled' }>): Promise<RunAgentOutcome> {
  const { committer, thoughts, msg } = scope;
  const d = ev.data;
  await committer.commitTerminal(ev.id, 'run_cancelled', async (tx) => {
    const partial = committer.streamedAnswer;
    const streamed = [...(await committer.writePendingText(tx)), ...(await thoughts.finish(tx, partial, ev.id))];
    const usage = await saveUsageAndSnapshot(scope, tx, d.usage, d.session_snapshot, { status: 'stopped', answer: partial }, ev.run_id);
    return [...streamed, ...finalAnswerEvents(msg, { answer: partial, usage, retrieverResources: await turnCitations(tx, msg) })];
  });
  return { status: 'stopped' };
}

async function failed(scope: RunScope, ev: Extract<TerminalEvent, { type: 'run_failed' }>): Promise<RunAgentOutcome> {
  const { committer, thoughts, msg } = scope;
  const d = ev.data;
  const err = classifyFailure(d);
  await committer.commitTerminal(ev.id, 'run_failed', async (tx) => {
    const streamed = [...(await committer.writePendingText(tx)), ...(await thoughts.finish(tx, committer.streamedAnswer, ev.id))];
    // The backend's own words are kept beside the client's code and message (GET /v1/messages `agent_failure`).
    const agentFailure = { error_type: d.error_type ?? null, reason: d.reason ?? null, error: d.error, backend_run_id: ev.run_id };
    // Read in the transaction: the api may have added to it during the run (knowledge retriever_resources).
    const current = await tx.message.findUnique({ where: { id: msg.id }, select: { metadata: true } });
    const metadata = { ...((current?.metadata ?? {}) as Record<string, unknown>), agent_failure: agentFailure };
    // No usage (the reaper's backend_restarted: the process that metered the run is gone): the run's ledger rows.
    const usage = await saveUsageAndSnapshot(
      scope,
      tx,
      d.usage,
      d.session_snapshot,
      { status: 'failed', error: err.message, error_code: err.code, metadata },
      ev.run_id,
    );
    // The backend found the binding's workspace gone (seed 001 binding_lost, issue 31): the binding and its workspace
    // are retired with the failure, and the owner's next turn starts the next binding (activities/prepare/binding.ts, core/domain/turn/bindings.ts).
    if (d.reason === 'binding_lost' && scope.bindingId) await retireLostBinding(tx, scope.bindingId);
    return [...streamed, ...errorEvents(msg, err, usage)];
  });
  if (d.reason === 'binding_lost' && scope.bindingId) await removeLostWorkspace(scope, scope.bindingId);
  return { status: 'failed', errorCode: err.code };
}

async function retireLostBinding(tx: Tx, bindingId: string): Promise<void> {
  const now = new Date();
  const b = await tx.agentWorkspaceBinding.findUnique({ where: { id: bindingId }, select: { workspace_id: true } });
  if (!b) return;
  await tx.agentWorkspaceBinding.updateMany({
    where: { id: bindingId, retired_at: null },
    data: { retired_at: now, retired_reason: 'binding_lost' },
  });
  await tx.agentWorkspace.updateMany({ where: { id: b.workspace_id, status: 'active' }, data: { status: 'retired', retired_at: now } });
}

/** Whatever is left at the lost workspace's path (a foreign copy, files the api placed this turn): best effort. */
async function removeLostWorkspace(scope: RunScope, bindingId: string): Promise<void> {
  const b = await scope.deps.db.agentWorkspaceBinding.findUnique({ where: { id: bindingId }, select: { workspace_id: true } });
  if (!b) return;
  const bucket = bucketOf(scope.deps.config);
  if (bucket) {
    await bucket
      .remove(b.workspace_id)
      .catch((err: unknown) => scope.log.warn({ err, bindingId }, 'lost workspace: its bucket objects could not be removed'));
    return;
  }
  const dir = path.join(scope.deps.config.workspacesDir, b.workspace_id);
  await removeTree(dir).catch((err: unknown) => scope.log.warn({ err, bindingId }, 'lost workspace: its directory could not be removed'));
  removeMarker(dir);
}

/** The backend did not confirm a stop within STOP_WAIT_MS: keep what we have, snapshot untouched, usage as billed. */
export async function stopWithoutTerminal(scope: RunScope, backendRunId: string): Promise<never> {
  const { committer, thoughts, msg } = scope;
  await committer.commitTerminal(null, 'stop_timeout', async (tx) => {
    const partial = committer.streamedAnswer;
    const streamed = [...(await committer.writePendingText(tx)), ...(await thoughts.finish(tx, partial, 'stop'))];
    const usage = await saveUsageAndSnapshot(scope, tx, null, null, { status: 'stopped', answer: partial }, backendRunId);
    return [...streamed, ...finalAnswerEvents(msg, { answer: partial, usage, retrieverResources: await turnCitations(tx, msg) })];
  });
  throw new CancelledFailure('turn stopped (backend did not confirm in time)');
}

/** A stop before the backend run exists: create nothing afterwards. */
export async function stopBeforeStart(scope: RunScope): Promise<never> {
  const { committer, msg } = scope;
  await committer.commitTerminal(null, 'run_cancelled', async (tx) => {
    // No run, nothing billed: zero usage, on the message as in message_end.
    const usage = await saveUsageAndSnapshot(scope, tx, null, null, { status: 'stopped' }, null);
    return finalAnswerEvents(msg, { answer: msg.answer, usage });
  });
  throw new CancelledFailure('stopped before the agent run started');
}
