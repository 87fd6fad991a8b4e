/**
 * ask_human forms (docs/PROTOCOL.md §1/§5): read the form to render, and submit it. Only the conversation's end
 * user may read or submit (another user of the app never learns the form exists); the submission itself is
 * api/turns/form-submission.ts, shared with the console's debugger forms.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import { appCtx } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { FormToken, formJson, submitForm } from '../turns/form-submission.js';
import { UserId } from '../schemas.js';

const SubmitBody = z.object({
  inputs: z.record(z.string(), z.unknown()).default({}),
  action: z.string().min(1).max(64),
  user: UserId,
});

export function formRoutes(deps: { db: Db; outbox: OutboxDispatcher; logger: Logger }): Router {
  const r = Router();
  const { db } = deps;

  /** The form if it belongs to this app and this end user: the token alone is not enough inside an app. */
  async function load(appId: string, token: string, user: string) {
    const form = await db.humanInputForm.findUnique({ where: { token } });
    const endUser =
      form?.app_id === appId ? await db.endUser.findUnique({ where: { app_id_session_id: { app_id: appId, session_id: user } } }) : null;
    if (!form || !endUser || endUser.id !== form.end_user_id) throw new HttpError(404, 'human_input_form_not_found', 'Form not found.');
    return form;
  }

  r.get('/form/human_input/:token', async (req, res) => {
    const app = appCtx(req);
    const token = parseOr400(FormToken, req.params.token, 'form_token');
    const form = await load(app.appId, token, parseOr400(UserId, req.query.user, 'user'));
    res.json(formJson(form));
  });

  r.post('/form/human_input/:token', async (req, res) => {
    const app = appCtx(req);
    const token = parseOr400(FormToken, req.params.token, 'form_token');
    const body = parseOr400(SubmitBody, req.body);
    const form = await load(app.appId, token, body.user);
    res.json(await submitForm(deps, form, body));
  });

  return r;
}
