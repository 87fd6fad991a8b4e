/**
 * The ask_human pause (docs/seeds/000 _pause_for_ask_human): the run succeeded with a deferred tool call. One
 * commit creates the form keyed by the message id, records the pause correlation on the binding, and ends
 * the turn with the agent's question as its answer and the form for clients to render.
 */
import crypto from 'node:crypto';
import { formFromArgs, newFormToken } from '../../core/domain/human-input.js';
import type { Prisma } from '../../core/platform/db.js';
import type { DeferredToolCall, SessionSnapshot, Usage } from '../../core/protocol/run.js';
import { unixSeconds } from '../../core/platform/time.js';
import { turnCitations } from '../citations.js';
import { finalAnswerEvents } from '../final-events.js';
import type { RunAgentOutcome, RunScope } from './scope.js';
import { saveUsageAndSnapshot } from './usage.js';

export async function pauseForHuman(
  scope: RunScope,
  eventId: string,
  d: { usage: Usage; session_snapshot: SessionSnapshot },
  call: DeferredToolCall,
): Promise<RunAgentOutcome> {
  const { committer, thoughts, msg, bindingId } = scope;
  const form = formFromArgs(call.args);
  const formId = crypto.randomUUID();
  const formToken = newFormToken();
  const expiresAt = new Date(Date.now() + scope.deps.config.HUMAN_INPUT_FORM_EXPIRY_HOURS * 3_600_000);
  const title = form.title ?? 'The agent needs your input';
  // The chat answer echoes the whole form as text (question and its markdown): what a client that does
  // not render forms, or a later read of the conversation, shows.
  const formContent = [form.question, form.markdown].filter(Boolean).join('\n\n');
  const answer = [committer.streamedAnswer, formContent].filter(Boolean).join('\n\n');
  await committer.commitTerminal(eventId, 'deferred_tool_call', async (tx) => {
    const streamed = [...committer.pendingEvents(), ...(await thoughts.finish(tx, answer, eventId))];
    await tx.humanInputForm.create({
      data: {
        id: formId,
        tenant_id: msg.tenant_id,
        app_id: msg.app_id,
        conversation_id: msg.conversation_id,
        message_id: msg.id,
        end_user_id: msg.end_user_id,
        node_id: msg.id,
        token: formToken,
        title,
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
    if (bindingId) {
      await tx.agentWorkspaceBinding.update({
        where: { id: bindingId },
        data: { pending_form_id: formId, pending_tool_call_id: call.tool_call_id, pending_message_id: msg.id },
      });
    }
    await saveUsageAndSnapshot(scope, tx, d.usage, d.session_snapshot, { status: 'paused', answer }, null, call.tool_call_id);
    const humanInput = {
      form_id: formId,
      form_token: formToken,
      node_id: msg.id,
      node_title: title,
      form_content: formContent,
      inputs: form.fields,
      actions: form.actions,
      expiration_time: unixSeconds(expiresAt),
    };
    return [
      ...streamed,
      ...finalAnswerEvents(msg, { answer, usage: d.usage, humanInput, retrieverResources: await turnCitations(tx, msg) }),
    ];
  });
  return { status: 'paused', toolCallId: call.tool_call_id, formId, formToken, expiresAt: expiresAt.toISOString() };
}
