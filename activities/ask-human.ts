/** Steps of the ask_human wait: expiry, the continuation message on timeout, and cancel on stop. */
import { createResumeMessage } from '../core/domain/human-input.js';
import type { ActivityDeps } from './deps.js';

export function createAskHumanActivities({ db }: ActivityDeps) {
  return {
    /** The form's timer fired: expire it unless a submission won the race. */
    async expireForm(input: {
      formId: string;
    }): Promise<{ status: 'expired' | 'submitted' | 'cancelled'; resumeMessageId: string | null }> {
      await db.humanInputForm.updateMany({ where: { id: input.formId, status: 'waiting' }, data: { status: 'expired' } });
      const form = await db.humanInputForm.findUniqueOrThrow({ where: { id: input.formId } });
      // A submission that won the race (its signal may have been lost) carries its continuation id.
      return { status: form.status as 'expired' | 'submitted' | 'cancelled', resumeMessageId: form.resume_message_id };
    },

    /** Timeout path: the continuation message the workflow runs with a `timeout` result. */
    async createTimeoutResume(input: { pausedMessageId: string; formId: string; resumeMessageId: string }): Promise<void> {
      await db.$transaction((tx) => createResumeMessage(tx as never, input.pausedMessageId, input.formId, input.resumeMessageId));
    },

    /** Stop while waiting: the form is cancelled; the next turn closes the dangling call as `unavailable`. */
    async cancelPendingForm(input: { formId: string; messageId: string }): Promise<void> {
      await db.$transaction([
        db.humanInputForm.updateMany({ where: { id: input.formId, status: 'waiting' }, data: { status: 'cancelled' } }),
        db.message.updateMany({ where: { id: input.messageId, status: 'paused' }, data: { status: 'stopped' } }),
      ]);
    },
  };
}
