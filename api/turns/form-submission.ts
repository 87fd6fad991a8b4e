/**
 * An ask_human form as clients read it, and its submission (docs/PROTOCOL.md §5), shared by the service API's form
 * routes (the conversation's end user) and the console's debugger form routes (the debugging account). Exactly
 * one submission wins (a conditional update); it creates the continuation message and signals the waiting
 * workflow through the transactional outbox, so the signal is delivered even if Temporal is down and this
 * process dies before it comes back.
 */
import crypto from 'node:crypto';
import { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import type { Prisma } from '../../core/generated/prisma/client.js';
import {
  createResumeMessage,
  SubmissionError,
  validateSubmission,
  type FormAction,
  type FormField,
} from '../../core/domain/human-input.js';
import { enqueueOutbox, type OutboxDispatcher } from '../../core/domain/outbox.js';
import { unixSeconds } from '../../core/platform/time.js';
import { formSubmittedSignal, type FormSubmittedSignal } from '../../workflows/definitions.js';
import { HttpError } from '../errors.js';

export const FormToken = z
  .string()
  .min(10)
  .max(100)
  .regex(/^[A-Za-z0-9_-]+$/);

export type FormRow = Prisma.HumanInputFormGetPayload<object>;

/** The form to render: its question, fields, actions and (a passed expiry reads as `expired`) status. */
export function formJson(form: FormRow) {
  const expired = form.status === 'waiting' && form.expires_at <= new Date();
  return {
    form_id: form.id,
    form_token: form.token,
    node_id: form.node_id,
    node_title: form.title,
    form_content: [form.question, form.markdown].filter(Boolean).join('\n\n'),
    inputs: form.fields,
    actions: form.actions,
    urgency: form.urgency,
    status: expired ? 'expired' : form.status,
    expiration_time: unixSeconds(form.expires_at),
    conversation_id: form.conversation_id,
    message_id: form.message_id,
    resume_message_id: form.resume_message_id,
  };
}

function refuse(status: string): HttpError {
  if (status === 'submitted') return new HttpError(412, 'human_input_form_submitted', 'This form has already been submitted.');
  if (status === 'cancelled') return new HttpError(412, 'human_input_form_cancelled', 'This form was cancelled.');
  return new HttpError(412, 'human_input_form_expired', 'This form has expired.');
}

/** Submits `{inputs, action}` for a form whose caller was already checked; answers the continuation's ids. */
export async function submitForm(
  deps: { db: Db; outbox: OutboxDispatcher },
  form: FormRow,
  body: { inputs: Record<string, unknown>; action: string },
) {
  if (form.status !== 'waiting') throw refuse(form.status);
  if (form.expires_at <= new Date()) throw refuse('expired');
  let clean: { values: Record<string, string>; action: FormAction };
  try {
    clean = validateSubmission(form.fields as FormField[], form.actions as FormAction[], body.inputs, body.action);
  } catch (err) {
    if (err instanceof SubmissionError) throw new HttpError(400, 'invalid_param', err.message);
    throw err;
  }
  const resumeMessageId = crypto.randomUUID();
  // The submission, the continuation message and the owed signal commit together: a submitted form
  // always has its signal on the way (the workflow keeps one submission per form id, so a redelivery is harmless).
  const signal = await deps.db.$transaction(async (tx) => {
    const won = await tx.humanInputForm.updateMany({
      where: { id: form.id, status: 'waiting', expires_at: { gt: new Date() } },
      data: { status: 'submitted', submission: clean.values, submitted_action: clean.action.id, submitted_at: new Date() },
    });
    if (won.count !== 1) {
      const now = await tx.humanInputForm.findUniqueOrThrow({ where: { id: form.id } });
      throw refuse(now.status === 'waiting' ? 'expired' : now.status);
    }
    await createResumeMessage(tx as never, form.message_id, form.id, resumeMessageId);
    const payload: FormSubmittedSignal = { formId: form.id, resumeMessageId };
    return enqueueOutbox(tx, {
      kind: 'signal',
      workflowId: form.workflow_id,
      signalName: formSubmittedSignal.name,
      payload: { ...payload },
    });
  });
  // Fast path: wake the waiting workflow now. If Temporal is unreachable the outbox keeps trying (any
  // api or worker process); the submission stands either way, so the answer is the same.
  await deps.outbox.deliverNow(signal);
  return { result: 'success', task_id: resumeMessageId, message_id: resumeMessageId, conversation_id: form.conversation_id };
}
