/**
 * The end of a turn as clients see it (Dify's `publish_text_answer` role), built in one place for every
 * producer: the backend's answer (succeeded, paused for ask_human, cancelled, stopped), the moderation and
 * annotation short-circuits, and a failed or stopped turn. Each event carries its terminal source key, so a
 * replayed append stores nothing twice.
 */
import { turnEventBase, type ClientEventInput, type NewClientEvent } from '../core/protocol/client-events.js';
import { emptyUsage, type Usage } from '../core/protocol/run.js';
import type { RetrieverResource } from '../core/protocol/retriever-resource.js';
import type { TurnErrorDetails } from './errors.js';

/** The message the events belong to (what every turn event carries). */
export interface TurnMessage {
  id: string;
  conversation_id: string;
  created_at: Date;
}

/** Source keys of the events that end a turn: one of each per message, ever. */
export const TERMINAL_SOURCE_KEYS = {
  message_replace: 'terminal:message_replace',
  message: 'terminal:message',
  human_input_required: 'terminal:human_input_required',
  message_end: 'terminal:message_end',
  error: 'terminal:error',
} as const;

export interface FinalAnswer {
  /** The complete answer (clients replace the streamed deltas with it). */
  answer: string;
  /** Usage of the run; none (a guard answered, the run never confirmed) is published as zero usage. */
  usage?: Usage | null;
  /** Output moderation replaced the answer: clients are told first, with `message_replace`. */
  replacedBy?: 'output_moderation';
  /** The annotation that answered the turn, for `message_end` metadata. */
  annotationReply?: Record<string, unknown>;
  /** The chunks the answer was given, when its config asks for citations (activities/citations.ts). */
  retrieverResources?: RetrieverResource[] | null;
  /** An ask_human pause: the form clients render, published between the answer and its end. */
  humanInput?: ClientEventInput<'human_input_required'>['data'];
}

/** `message_replace` (when moderated), `message`, `human_input_required` (when paused) and `message_end`. */
export function finalAnswerEvents(msg: TurnMessage, final: FinalAnswer): NewClientEvent[] {
  const base = turnEventBase(msg);
  const events: NewClientEvent[] = [];
  if (final.replacedBy) {
    events.push({
      event: 'message_replace',
      sourceKey: TERMINAL_SOURCE_KEYS.message_replace,
      data: { ...base, event: 'message_replace', answer: final.answer, reason: final.replacedBy },
    });
  }
  events.push({
    event: 'message',
    sourceKey: TERMINAL_SOURCE_KEYS.message,
    data: { ...base, event: 'message', id: msg.id, answer: final.answer },
  });
  if (final.humanInput) {
    events.push({
      event: 'human_input_required',
      sourceKey: TERMINAL_SOURCE_KEYS.human_input_required,
      data: { ...base, event: 'human_input_required', data: final.humanInput },
    });
  }
  const metadata = {
    usage: final.usage ?? emptyUsage(),
    ...(final.annotationReply ? { annotation_reply: final.annotationReply } : {}),
    ...(final.retrieverResources ? { retriever_resources: final.retrieverResources } : {}),
  };
  events.push({
    event: 'message_end',
    sourceKey: TERMINAL_SOURCE_KEYS.message_end,
    data: { ...base, event: 'message_end', id: msg.id, metadata },
  });
  return events;
}

/**
 * The `error` event of a failed turn (the stream's HTTP status stays 200). `usage`: what the turn used and was billed
 * for (the message's own figures, in `metadata.usage` as on `message_end`); none is published as zero usage.
 */
export function errorEvents(msg: TurnMessage, err: TurnErrorDetails, usage?: Usage | null): NewClientEvent[] {
  return [
    {
      event: 'error',
      sourceKey: TERMINAL_SOURCE_KEYS.error,
      data: {
        ...turnEventBase(msg),
        event: 'error',
        status: err.status,
        code: err.code,
        message: err.message,
        metadata: { usage: usage ?? emptyUsage() },
      },
    },
  ];
}
