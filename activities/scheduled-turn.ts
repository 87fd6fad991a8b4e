/**
 * The activities of `scheduledTurn` (workflows/scheduled-turn.ts): create a scheduled run's turn through startTurn's
 * own records code (api/turns/scheduled.ts, injected by the worker as `createTurn`: the same admission, end user, lock
 * and Message a chat request gets, so audit and billing cannot tell them apart), and record how the run ended.
 */
import {
  AGENT_TURN_WORKFLOW,
  type AgentTurnInput,
  type CreateScheduledTurn,
  type StartedScheduledTurn,
} from '../core/protocol/workflow-contract.js';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { conversationName, markdownText } from '../core/domain/turn-text.js';

export interface ScheduleActivityDeps {
  db: Db;
  logger: Logger;
  createTurn: CreateScheduledTurn;
}

export function createScheduleActivities({ db, logger, createTurn }: ScheduleActivityDeps) {
  async function startScheduledTurn(args: { scheduleId: string; messageId: string }): Promise<StartedScheduledTurn> {
    const schedule = await db.appSchedule.findUnique({ where: { id: args.scheduleId }, include: { app: { include: { agent: true } } } });
    if (!schedule) return { kind: 'refused', error: 'schedule_not_found: the schedule was deleted.' };
    const describe = (conversationId: string) => ({
      summary: `Scheduled turn · ${markdownText(schedule.app.name)} · "${markdownText(conversationName(schedule.query))}"`,
      details: `schedule \`${schedule.id}\`\n\nconversation \`${conversationId}\`\n\nmessage \`${args.messageId}\`\n\nuser ${markdownText(schedule.user)}`,
    });
    // A retried attempt after the rows committed: the same turn, never a second one.
    const existing = await db.message.findUnique({ where: { id: args.messageId } });
    if (existing) {
      const input: AgentTurnInput = {
        tenantId: existing.tenant_id,
        appId: existing.app_id,
        agentId: schedule.app.agent!.id,
        conversationId: existing.conversation_id,
        messageId: existing.id,
        invokeFrom: 'service-api',
      };
      return { kind: 'started', input, ...describe(existing.conversation_id) };
    }
    const app = {
      tenantId: schedule.tenant_id,
      appId: schedule.app_id,
      agentId: schedule.app.agent?.id ?? null,
      appName: schedule.app.name,
    };
    const created = await createTurn({
      app,
      query: schedule.query,
      inputs: schedule.inputs,
      user: schedule.user,
      conversationId: schedule.conversation_mode === 'single' ? schedule.conversation_id : null,
      messageId: args.messageId,
      metadata: { schedule_id: schedule.id },
    });
    // The client-facing refusals of a chat request (busy conversation, server at capacity, …): this run is skipped.
    if (created.kind === 'refused') return created;
    if (schedule.conversation_mode === 'single' && !schedule.conversation_id) {
      await db.appSchedule.updateMany({
        where: { id: schedule.id, conversation_id: null },
        data: { conversation_id: created.conversationId },
      });
    }
    logger.info({ schedule_id: schedule.id, message_id: args.messageId, workflow: AGENT_TURN_WORKFLOW }, 'scheduled turn created');
    return { kind: 'started', input: created.input, ...describe(created.conversationId) };
  }

  async function recordScheduleRun(args: {
    scheduleId: string;
    messageId: string | null;
    status: string;
    error: string | null;
  }): Promise<void> {
    const runKey = args.messageId ?? `${args.scheduleId}:${args.error}:${Date.now()}`;
    await db.$transaction(async (tx) => {
      const schedule = await tx.appSchedule.findUnique({ where: { id: args.scheduleId } });
      if (!schedule) return;
      // A retry after this committed: the run's webhook event is written once.
      if (args.messageId && schedule.last_run_message_id === args.messageId && schedule.last_run_status === args.status) return;
      await tx.appSchedule.update({
        where: { id: args.scheduleId },
        data: { last_run_at: new Date(), last_run_status: args.status, last_run_message_id: args.messageId, last_run_error: args.error },
      });
      const event = args.messageId ? 'schedule.run_completed' : 'schedule.run_failed';
      const data = { schedule_id: schedule.id, run_key: runKey, message_id: args.messageId, status: args.status, error: args.error };
      await tx.$queryRaw`select enqueue_webhook_event(${schedule.app_id}::uuid, ${event}, ${JSON.stringify(data)}::jsonb)`;
    });
  }

  return { startScheduledTurn, recordScheduleRun };
}

export type ScheduleActivities = ReturnType<typeof createScheduleActivities>;
