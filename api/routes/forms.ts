/**
 * ask_human forms (docs/PROTOCOL.md §1/§5): read the form to render, and submit it. Exactly one submission wins
 * (a conditional update), only the conversation's user may submit, and a submission creates the
 * continuation message and signals the waiting workflow — through the transactional outbox, so the signal
 * is delivered even if Temporal is down and this process dies before it comes back.
 */
import crypto from 'node:crypto';
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/db.js';
import { createResumeMessage, SubmissionError, validateSubmission, type FormAction, type FormField } from '../../core/human-input.js';
import type { Logger } from '../../core/logger.js';
import { enqueueOutbox, type OutboxDispatcher } from '../../core/outbox.js';
import { formSubmittedSignal, type FormSubmittedSignal } from '../../workflows/definitions.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { UserId } from '../schemas.js';
import { unixSeconds } from '../../core/time.js';

const FormToken = z
  .string()
  .min(10)
  .max(100)
  .regex(/^[A-Za-z0-9_-]+$/);
const SubmitBody = z.object({
  inputs: z.record(z.string(), z.unknown()).default({}),
  action: z.string().min(1).max(64),
  user: UserId,
});

export function formRoutes(deps: { db: Db; outbox: OutboxDispatcher; logger: Logger }): Router {
  const r = Router();
  const { db } = deps;

  async function load(appId: string, token: string) {
    const form = await db.humanInputForm.findUnique({ where: { token } });
    if (!form || form.app_id !== appId) throw new HttpError(404, 'human_input_form_not_found', 'Form not found.');
    return form;
  }

  r.get('/form/human_input/:token', async (req, res) => {
    const app = appCtx(req);
    const form = await load(app.appId, parseOr400(FormToken, req.params.token, 'form_token'));
    // Only the conversation's user may read it: the token alone is not enough inside an app.
    const user = parseOr400(UserId, req.query.user, 'user');
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: user } } });
    if (!endUser || endUser.id !== form.end_user_id) throw new HttpError(404, 'human_input_form_not_found', 'Form not found.');
    const expired = form.status === 'waiting' && form.expires_at <= new Date();
    res.json({
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
    });
  });

  r.post('/form/human_input/:token', async (req, res) => {
    const app = appCtx(req);
    const token = parseOr400(FormToken, req.params.token, 'form_token');
    const body = parseOr400(SubmitBody, req.body);
    const form = await load(app.appId, token);
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: body.user } } });
    // Another user of the app never learns the form exists.
    if (!endUser || endUser.id !== form.end_user_id) throw new HttpError(404, 'human_input_form_not_found', 'Form not found.');
    const refuse = (status: string) => {
      if (status === 'submitted') return new HttpError(412, 'human_input_form_submitted', 'This form has already been submitted.');
      if (status === 'cancelled') return new HttpError(412, 'human_input_form_cancelled', 'This form was cancelled.');
      return new HttpError(412, 'human_input_form_expired', 'This form has expired.');
    };
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
    const signal = await db.$transaction(async (tx) => {
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
    res.json({ result: 'success', task_id: resumeMessageId, message_id: resumeMessageId, conversation_id: form.conversation_id });
  });

  return r;
}
