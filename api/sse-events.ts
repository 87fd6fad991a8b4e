/**
 * The SSE events of a turn (PROTOCOL §1), one zod schema each: documented in /openapi.json and used by
 * tests to check every frame the api streams. Frames are `id: <seq>`, `event: <name>`, `data: <json>`.
 */
import { z } from 'zod';
import { Usage } from '../core/protocol/run.js';

/** Fields every turn event carries (not `ping`). */
const TurnEventBase = z.object({
  conversation_id: z.string().uuid(),
  message_id: z.string().uuid(),
  /** The message id: what `stop` and the `events` re-attach route take. */
  task_id: z.string().uuid(),
  /** Unix seconds of the message's creation. */
  created_at: z.number().int(),
});

export const AgentMessageEvent = TurnEventBase.extend({
  event: z.literal('agent_message'),
  id: z.string().uuid(),
  /** A debounced text delta; the answer is the concatenation of the deltas. */
  answer: z.string(),
}).meta({ description: 'A debounced delta of the answer text.' });

export const AgentThoughtEvent = TurnEventBase.extend({
  event: z.literal('agent_thought'),
  id: z.string().uuid(),
  position: z.number().int(),
  thought: z.string(),
  observation: z.string(),
  tool: z.string(),
  tool_labels: z.record(z.string(), z.unknown()),
  tool_input: z.string(),
  message_files: z.array(z.unknown()),
}).meta({ description: 'The full current state of one thought row (created or updated).' });

export const MessageEvent = TurnEventBase.extend({
  event: z.literal('message'),
  id: z.string().uuid(),
  answer: z.string(),
}).meta({ description: 'Exactly one per turn: the complete final answer. Clients must not append it to the agent_message deltas.' });

export const MessageEndEvent = TurnEventBase.extend({
  event: z.literal('message_end'),
  id: z.string().uuid(),
  metadata: z.object({
    usage: Usage,
    annotation_reply: z.record(z.string(), z.unknown()).optional(),
  }),
}).meta({ description: 'The turn ended; the stream closes after it.' });

export const MessageReplaceEvent = TurnEventBase.extend({
  event: z.literal('message_replace'),
  answer: z.string(),
  reason: z.string(),
}).meta({ description: 'Output moderation replaced the answer.' });

/** An ask_human form as clients render it: in `human_input_required` and in GET /v1/form/human_input/{token}. */
export const HumanInputFormView = z.object({
  form_id: z.string().uuid(),
  form_token: z.string(),
  /** The message id. */
  node_id: z.string(),
  node_title: z.string(),
  form_content: z.string(),
  inputs: z.array(z.unknown()),
  actions: z.array(z.unknown()),
  /** Unix seconds. */
  expiration_time: z.number().int(),
});

export const HumanInputRequiredEvent = TurnEventBase.extend({
  event: z.literal('human_input_required'),
  data: HumanInputFormView,
}).meta({ description: 'The agent asked a human (ask_human): submit the form at POST /v1/form/human_input/{form_token}.' });

export const ErrorEvent = TurnEventBase.extend({
  event: z.literal('error'),
  code: z.string(),
  status: z.number().int(),
  message: z.string(),
}).meta({ description: 'The turn failed (the HTTP status of the stream stays 200); the stream closes after it.' });

export const PingEvent = z.object({ event: z.literal('ping') }).meta({ description: 'Keep-alive, about every 10 s.' });

export const SSE_EVENTS = {
  AgentMessageEvent,
  AgentThoughtEvent,
  MessageEvent,
  MessageEndEvent,
  MessageReplaceEvent,
  HumanInputRequiredEvent,
  ErrorEvent,
  PingEvent,
} as const;

export const SseEvent = z.discriminatedUnion('event', [
  AgentMessageEvent,
  AgentThoughtEvent,
  MessageEvent,
  MessageEndEvent,
  MessageReplaceEvent,
  HumanInputRequiredEvent,
  ErrorEvent,
  PingEvent,
]);
export type SseEvent = z.output<typeof SseEvent>;
