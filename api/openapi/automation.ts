/**
 * Scheduled turns, webhooks and the console's fork (api/console/schedules.ts, api/console/webhooks.ts, api/console/fork.ts;
 * issue 35) in the OpenAPI document
 * (api/openapi/index.ts merges it). The response schemas are zod, so the integration tests check live answers against them.
 */
import { z } from 'zod';
import { PAGE_PARAMETERS } from '../pagination.js';
import { CreateScheduleBody } from '../console/schedules.js';
import { CreateWebhookBody, UpdateWebhookBody, WEBHOOK_EVENTS, WebhookEventListResponse } from '../console/webhooks.js';
import { DebugForkRequest } from '../console/fork.js';
import { ForkConversationResponse } from '../schemas.js';
import { appIdParam, pathParam } from './params.js';

type JsonSchema = Record<string, unknown>;
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (schema: JsonSchema) => ({ 'application/json': { schema } });

const Id = z.string().uuid();
const Unix = z.number().int();
const page = <T extends z.ZodType>(item: T) =>
  z.object({ data: z.array(item), has_more: z.boolean(), limit: z.number().int(), total: z.number().int(), page: z.number().int() });

export const ScheduleResponse = z.object({
  id: Id,
  name: z.string(),
  temporal_schedule_id: z.string().describe('`app-schedule-<id>`: the schedule in the Temporal UI.'),
  cron: z.string().nullable(),
  interval_seconds: z.number().int().nullable(),
  time_zone: z.string(),
  query: z.string(),
  inputs: z.unknown(),
  user: z.string(),
  conversation_mode: z.enum(['new', 'single']),
  conversation_id: Id.nullable().describe('`single`: the conversation every run continues (set by the first run).'),
  overlap_policy: z.enum(['skip', 'buffer_one', 'buffer_all', 'allow_all']),
  catchup_window_seconds: z.number().int(),
  paused: z.boolean(),
  last_run: z
    .object({ at: Unix, status: z.string().nullable(), message_id: Id.nullable(), error: z.string().nullable() })
    .nullable()
    .describe("`status`: the turn's outcome (succeeded, failed, stopped, …) or `not_started` with the refusal in `error`."),
  created_at: Unix,
});
export const ScheduleDetailResponse = ScheduleResponse.extend({
  next_run_times: z.array(Unix).nullable().describe('Upcoming runs (unix seconds) from Temporal; null when it did not answer.'),
});
export const ScheduleListResponse = page(ScheduleDetailResponse);

export const WebhookResponse = z.object({
  id: Id,
  url: z.string().describe('The receiver URL (the userinfo of a row saved before it was refused shows as `****`).'),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  enabled: z.boolean(),
  created_at: Unix,
});
export const CreatedWebhookResponse = WebhookResponse.extend({
  secret: z.string().describe('The signing secret (`whsec_…`), shown only in this response.'),
});
export const WebhookListResponse = page(WebhookResponse);
export const WebhookDeliveryResponse = z.object({
  id: Id,
  webhook_id: Id,
  event: z.string(),
  event_id: Id.describe('The event; a redelivery has the same one (receivers deduplicate by it).'),
  status: z.enum(['pending', 'succeeded', 'failed', 'refused']),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  response_code: z.number().int().nullable(),
  redelivery_of: Id.nullable(),
  created_at: Unix,
  delivered_at: Unix.nullable(),
});
export const WebhookDeliveryDetailResponse = WebhookDeliveryResponse.extend({ payload: z.unknown().describe('The body as sent.') });
export const WebhookDeliveryListResponse = page(WebhookDeliveryResponse);

export const DebugForkResponse = ForkConversationResponse.extend({
  active_message_id: Id.nullable().describe('Always null: a fork starts with no turn in flight.'),
});

export const AUTOMATION_REQUESTS = {
  DebugForkRequest,
  CreateScheduleRequest: CreateScheduleBody,
  CreateWebhookRequest: CreateWebhookBody,
  UpdateWebhookRequest: UpdateWebhookBody,
};
export const AUTOMATION_RESPONSES = {
  DebugForkResponse,
  ScheduleResponse,
  ScheduleDetailResponse,
  ScheduleListResponse,
  WebhookResponse,
  CreatedWebhookResponse,
  WebhookListResponse,
  WebhookEventListResponse,
  WebhookDeliveryResponse,
  WebhookDeliveryDetailResponse,
  WebhookDeliveryListResponse,
};

export function automationPaths(errors: (...statuses: number[]) => Record<string, unknown>): Record<string, Record<string, JsonSchema>> {
  const security = [{ ConsoleKey: [] }];
  const appId = appIdParam;
  const scheduleId = pathParam('schedule_id', 'Schedule id.');
  const webhookId = pathParam('webhook_id', 'Webhook id.');
  const deliveryId = pathParam('delivery_id', 'Delivery id (from the log).');
  const conversationId = pathParam('conversation_id', 'One of the caller’s debugger conversations.');
  const op = (
    operationId: string,
    summary: string,
    parameters: unknown[],
    responses: Record<string, unknown>,
    extra: JsonSchema = {},
    statuses: number[] = [],
  ) => ({
    operationId,
    tags: ['console'],
    security,
    parameters,
    summary,
    ...extra,
    responses: { ...responses, ...errors(...statuses) },
  });
  const ok = (description: string, schema: string) => ({ description, content: json(ref(schema)) });
  const scheduleAction = (name: string, summary: string, status: '200' | '202') => ({
    post: op(`${name}AppSchedule`, summary, [appId, scheduleId], { [status]: ok('The schedule.', 'ScheduleResponse') }),
  });
  return {
    '/console/api/apps/{app_id}/agent/debug/conversations/{conversation_id}/fork': {
      post: op(
        'forkDebugConversation',
        'A new debugger conversation of the caller forked at `message_id`, as `POST /v1/conversations/{conversation_id}/fork` does for an end user: a copy of the thread up to it, its own binding holding the session after it, a copy of the workspace (`workspace_copy`). 404 `conversation_not_exists` (another account’s, or not a debugger conversation), `message_not_exists`; 409 `message_not_finished`, `conversation_busy`, `fork_point_waiting_for_human`; 413 `workspace_quota_exceeded`.',
        [appId, conversationId],
        { '201': ok('The new debugger conversation.', 'DebugForkResponse') },
        { requestBody: { required: true, content: json(ref('DebugForkRequest')) } },
      ),
    },
    '/console/api/apps/{app_id}/schedules': {
      get: op('listAppSchedules', "The app's schedules, newest first, a page at a time.", [appId, ...PAGE_PARAMETERS], {
        '200': ok('The schedules.', 'ScheduleListResponse'),
      }),
      post: op(
        'createAppSchedule',
        'A scheduled turn: a Temporal Schedule whose every run is an ordinary turn of `user` (new conversation each time, or one). Overlap default `skip` (`buffer_one` for `single`). 400 `invalid_schedule` for a cron with a mistake (its message names the field, the value and what a cron looks like) or one Temporal refuses; 400 `schedule_interval_too_short` when it would run more often than `SCHEDULE_MIN_INTERVAL_SECONDS` (60 s by default: its `interval_seconds`, or the two closest times of its cron, seconds fields and `@every` included); 403 `schedule_quota_exceeded` when the app holds `SCHEDULES_PER_APP` (20) or the tenant `SCHEDULES_PER_TENANT` (100); 503 without Temporal.',
        [appId],
        { '201': ok('The schedule.', 'ScheduleResponse') },
        { requestBody: { required: true, content: json(ref('CreateScheduleRequest')) } },
        [403, 503],
      ),
    },
    '/console/api/apps/{app_id}/schedules/{schedule_id}': {
      get: op('getAppSchedule', 'One schedule with its upcoming run times. 404 `schedule_not_found`.', [appId, scheduleId], {
        '200': ok('The schedule.', 'ScheduleDetailResponse'),
      }),
      delete: op('deleteAppSchedule', 'Deletes the Temporal schedule and the row; a run in progress finishes.', [appId, scheduleId], {
        '204': { description: 'Deleted.' },
      }),
    },
    '/console/api/apps/{app_id}/schedules/{schedule_id}/pause': scheduleAction('pause', 'Pause the schedule.', '200'),
    '/console/api/apps/{app_id}/schedules/{schedule_id}/unpause': scheduleAction('unpause', 'Unpause the schedule.', '200'),
    '/console/api/apps/{app_id}/schedules/{schedule_id}/trigger': scheduleAction(
      'trigger',
      'One run now (even while paused), under the overlap policy.',
      '202',
    ),
    '/console/api/webhook-events': {
      get: op(
        'listWebhookEvents',
        'Every event a webhook can ask for in `events` (docs/PROTOCOL.md "Scheduled turns and webhooks"); the studio makes its event checkboxes from it.',
        [],
        { '200': ok('The events.', 'WebhookEventListResponse') },
      ),
    },
    '/console/api/apps/{app_id}/webhooks': {
      get: op('listAppWebhooks', "The app's webhooks (never their secrets), newest first, a page at a time.", [appId, ...PAGE_PARAMETERS], {
        '200': ok('The webhooks.', 'WebhookListResponse'),
      }),
      post: op(
        'createAppWebhook',
        'A webhook for turn outcomes and schedule results; the response carries its signing secret this once (docs/PROTOCOL.md "Scheduled turns and webhooks"). The URL is checked with the delivery guard: 400 `invalid_webhook_url` for `user:password@`, a host that does not resolve, or a loopback/private/metadata address (unless the deployment sets `WEBHOOK_ALLOW_PRIVATE_NETWORK`). 403 `webhook_quota_exceeded` when the app holds `WEBHOOKS_PER_APP` (10) or the tenant `WEBHOOKS_PER_TENANT` (50).',
        [appId],
        { '201': ok('The webhook and its secret.', 'CreatedWebhookResponse') },
        { requestBody: { required: true, content: json(ref('CreateWebhookRequest')) } },
        [403],
      ),
    },
    '/console/api/apps/{app_id}/webhooks/{webhook_id}': {
      patch: op(
        'updateAppWebhook',
        'Change the URL, the events or enabled. A new URL is checked as at creation (400 `invalid_webhook_url`).',
        [appId, webhookId],
        { '200': ok('The webhook.', 'WebhookResponse') },
        {
          requestBody: { required: true, content: json(ref('UpdateWebhookRequest')) },
        },
      ),
      delete: op('deleteAppWebhook', 'Delete the webhook and its delivery log. 404 `webhook_not_found`.', [appId, webhookId], {
        '204': { description: 'Deleted.' },
      }),
    },
    '/console/api/apps/{app_id}/webhooks/{webhook_id}/deliveries': {
      get: op(
        'listWebhookDeliveries',
        'The delivery log, newest first: status, attempts, last error, response code.',
        [appId, webhookId, ...PAGE_PARAMETERS],
        {
          '200': ok('The deliveries.', 'WebhookDeliveryListResponse'),
        },
      ),
    },
    '/console/api/apps/{app_id}/webhooks/{webhook_id}/deliveries/{delivery_id}': {
      get: op('getWebhookDelivery', 'One delivery with its payload. 404 `webhook_delivery_not_found`.', [appId, webhookId, deliveryId], {
        '200': ok('The delivery.', 'WebhookDeliveryDetailResponse'),
      }),
    },
    '/console/api/apps/{app_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver': {
      post: op(
        'redeliverWebhookDelivery',
        'A new delivery of the same event (same body and event id), started now — or, when the app or tenant is over its delivery rate, when its window ends (delayed, not dropped).',
        [appId, webhookId, deliveryId],
        {
          '202': ok('The new delivery.', 'WebhookDeliveryResponse'),
        },
      ),
    },
  };
}
