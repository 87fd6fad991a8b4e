/**
 * The client events of a turn (docs/PROTOCOL.md §1), defined once: names, one zod schema each, and the
 * TypeScript types producers write and readers get back. The event log stores them, the SSE writer
 * streams them (`id: <seq>`, `event: <name>`, `data: <json>`), /openapi.json documents them and tests
 * check every frame against them.
 */
import { z } from 'zod';
import { RetrieverResource } from './retriever-resource.js';
import { Usage } from './run.js';
import { unixSeconds } from '../platform/time.js';

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

export const MessageFileEvent = TurnEventBase.extend({
  event: z.literal('message_file'),
  /** The MessageFile id (also in the tool's agent_thought message_files). */
  id: z.string().uuid(),
  /** image | document */
  type: z.string(),
  belongs_to: z.literal('assistant'),
  /** A signed link to the file (expires: the message history hands out fresh ones). */
  url: z.string(),
}).meta({ description: "A file the agent's tool produced (the shell's outputs/), attached to the answer." });

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
    /** Dify's citation and attribution list: present when the app's retriever_resource feature is on (with knowledge). */
    retriever_resources: z.array(RetrieverResource).optional(),
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
  /** What the failed turn used, as billed (the message's usage, as on `message_end`); absent on older events. */
  metadata: z.object({ usage: Usage }).optional(),
}).meta({ description: 'The turn failed (the HTTP status of the stream stays 200); the stream closes after it.' });

/**
 * Extension (issue 34/35): the first frame of the stream of a message accepted behind the turn in flight (a
 * `multitask_strategy` other than `reject`), before any turn event — so a client knows its id and place in line at
 * once. It is no event of the log: no `id:` (Last-Event-ID is unchanged), written again with the current place when a
 * client re-attaches while the message still waits. Dify's clients skip event names they do not know.
 */
export const MessageQueuedEvent = TurnEventBase.extend({
  event: z.literal('message_queued'),
  /** Its place in its conversation's line when the frame was written: 1 = it runs next. */
  position: z.number().int().min(1),
  /** The strategy it was accepted with (interrupt / rollback also stopped the turn in flight). */
  strategy: z.enum(['enqueue', 'interrupt', 'rollback']),
}).meta({
  description:
    "Extension: the message waits behind the turn in flight (multitask); first frame of its stream, no `id:`. `position`: its place in line (1 = next). Its turn's events follow when it runs (or `message` + `message_end` if it is stopped first).",
});
export type MessageQueuedEvent = z.output<typeof MessageQueuedEvent>;

export const PingEvent = z.object({ event: z.literal('ping') }).meta({ description: 'Keep-alive, about every 10 s.' });

export const SSE_EVENTS = {
  AgentMessageEvent,
  AgentThoughtEvent,
  MessageFileEvent,
  MessageEvent,
  MessageEndEvent,
  MessageReplaceEvent,
  HumanInputRequiredEvent,
  ErrorEvent,
  MessageQueuedEvent,
  PingEvent,
} as const;

export const SseEvent = z.discriminatedUnion('event', [
  AgentMessageEvent,
  AgentThoughtEvent,
  MessageFileEvent,
  MessageEvent,
  MessageEndEvent,
  MessageReplaceEvent,
  HumanInputRequiredEvent,
  ErrorEvent,
  MessageQueuedEvent,
  PingEvent,
]);
export type SseEvent = z.output<typeof SseEvent>;

/** The turn events a producer writes into the event log (everything but the transport's `ping`). */
export const CLIENT_EVENT_SCHEMAS = {
  agent_message: AgentMessageEvent,
  agent_thought: AgentThoughtEvent,
  message_file: MessageFileEvent,
  message: MessageEvent,
  message_end: MessageEndEvent,
  message_replace: MessageReplaceEvent,
  human_input_required: HumanInputRequiredEvent,
  error: ErrorEvent,
} as const;

export type ClientEventName = keyof typeof CLIENT_EVENT_SCHEMAS;
/** What a producer writes for event `K` (zod input: defaults may be left out). */
export type ClientEventInput<K extends ClientEventName = ClientEventName> = z.input<(typeof CLIENT_EVENT_SCHEMAS)[K]>;
/** What a reader gets back for event `K`. */
export type ClientEventData<K extends ClientEventName = ClientEventName> = z.output<(typeof CLIENT_EVENT_SCHEMAS)[K]>;

/** Events after which a turn's stream closes. */
export const TERMINAL_CLIENT_EVENTS: ReadonlySet<ClientEventName> = new Set<ClientEventName>(['message_end', 'error']);

export function isTerminalClientEvent(name: string): boolean {
  return TERMINAL_CLIENT_EVENTS.has(name as ClientEventName);
}

/** One event to append: its name, the producer's natural key (`be:42:agent_message`, `terminal:message_end`) and its data. */
export type NewClientEvent = { [K in ClientEventName]: { event: K; sourceKey: string; data: ClientEventInput<K> } }[ClientEventName];

/** One event as stored: its per-message sequence number (the SSE `id:`), its name and data. */
export type StoredClientEvent = { [K in ClientEventName]: { seq: number; event: K; data: ClientEventData<K> } }[ClientEventName];

/** The fields every client event of a turn carries. */
export function turnEventBase(msg: { id: string; conversation_id: string; created_at: Date }) {
  return { task_id: msg.id, message_id: msg.id, conversation_id: msg.conversation_id, created_at: unixSeconds(msg.created_at) };
}
