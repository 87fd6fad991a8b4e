/**
 * The turn's thoughts (MessageAgentThought rows) as the run streams them: the process recorder turns backend
 * stream events into rows; this persists each changed row inside the attempt's commit and publishes it whole
 * as `agent_thought`, except an answer row held back until a later row proves it was not the final answer.
 */
import type { ClientEventInput, NewClientEvent } from '../../core/protocol/client-events.js';
import { turnEventBase } from '../../core/protocol/client-events.js';
import type { Db, Prisma } from '../../core/platform/db.js';
import type { AgentStreamEvent } from '../../core/protocol/run.js';
import type { TurnMessage } from '../final-events.js';
import { ProcessRecorder, type ThoughtRow } from '../process-recorder.js';
import type { Tx } from './commit.js';

export class ThoughtLog {
  /** What clients last got of each row (by position): a row an event leaves unchanged is not sent again. */
  private readonly published = new Map<number, string>();

  private constructor(
    private readonly recorder: ProcessRecorder,
    private readonly msg: TurnMessage,
  ) {
    for (const r of recorder.all) if (!recorder.isHeld(r)) this.published.set(r.position, JSON.stringify(thoughtEventData(msg, r)));
  }

  /** Rebuilds the recorder from stored rows (written only together with a cursor: a first attempt has none). */
  static async load(db: Db, msg: TurnMessage, cursor: string | null): Promise<ThoughtLog> {
    if (cursor === null) return new ThoughtLog(new ProcessRecorder(), msg);
    const [stored, lastCall] = await Promise.all([
      db.messageAgentThought.findMany({ where: { message_id: msg.id }, orderBy: { position: 'asc' } }),
      db.messageModelCall.findFirst({ where: { message_id: msg.id }, orderBy: { call_index: 'desc' }, select: { call_index: true } }),
    ]);
    return new ThoughtLog(new ProcessRecorder(stored.map(toThoughtRow), lastCall ? lastCall.call_index + 1 : 0), msg);
  }

  /**
   * A `model_response` event: the model request's tokens, price and latency (issue 18) as a write for the next
   * commit (RunCommitter.defer: no transaction of its own). One row per call_index, upserted: a replayed event
   * cannot count a call twice.
   */
  modelCall(ev: AgentStreamEvent): ((tx: Tx) => Promise<unknown>) | null {
    this.recorder.handle(ev);
    const callIndex = ev.call_index;
    const u = ev.usage;
    if (callIndex === undefined || !u) return null;
    const data = {
      prompt_tokens: u.prompt_tokens,
      completion_tokens: u.completion_tokens,
      total_price: u.total_price,
      currency: u.currency,
      latency: u.latency,
    };
    return (tx) =>
      tx.messageModelCall.upsert({
        where: { message_id_call_index: { message_id: this.msg.id, call_index: callIndex } },
        create: { message_id: this.msg.id, call_index: callIndex, ...data },
        update: data,
      });
  }

  /** The rows one stream event changed, with a held answer row it released. */
  handle(ev: AgentStreamEvent): ThoughtRow[] {
    const held = this.recorder.heldAnswer();
    const rows = this.recorder.handle(ev);
    // A held answer row followed by another row was not the final answer: release it to clients.
    if (held && !this.recorder.isHeld(held) && !rows.includes(held)) rows.unshift(held);
    return rows;
  }

  /** Persists rows and publishes each as `agent_thought`, except a held answer row (see ProcessRecorder). */
  async persist(tx: Tx, rows: ThoughtRow[], sourceId: string, publishHeld = false): Promise<NewClientEvent[]> {
    const out: NewClientEvent[] = [];
    for (const r of rows) {
      // Two events that leave a row as it was (a tool call announced by part_start, then by
      // function_tool_call with the same arguments) are one frame for clients, not two identical ones.
      const event = thoughtEventData(this.msg, r);
      const seen = JSON.stringify(event);
      if (this.published.get(r.position) === seen) continue;
      const data = {
        thought: r.thought,
        tool: r.tool,
        tool_labels: r.tool_labels as Prisma.InputJsonValue,
        tool_input: r.tool_input,
        observation: r.observation,
        tool_call_id: r.tool_call_id,
        part_index: r.part_index,
        message_files: r.message_files,
        call_index: r.call_index,
        tool_meta: r.tool_meta as Prisma.InputJsonValue,
      };
      await tx.messageAgentThought.upsert({
        where: { message_id_position: { message_id: this.msg.id, position: r.position } },
        create: { id: r.id, message_id: this.msg.id, position: r.position, kind: r.kind, ...data },
        update: data,
      });
      if (!publishHeld && this.recorder.isHeld(r)) continue;
      this.published.set(r.position, seen);
      out.push({ event: 'agent_thought', sourceKey: `be:${sourceId}:thought:${r.position}`, data: event });
    }
    return out;
  }

  /** Answer-row bookkeeping at a terminal (docs/seeds/001 trim_answer_suffix): trim, publish or drop the held row. */
  async finish(tx: Tx, finalText: string, sourceId: string): Promise<NewClientEvent[]> {
    const { changed, removed } = this.recorder.finishAnswer(finalText);
    if (removed) await tx.messageAgentThought.deleteMany({ where: { id: removed.id } });
    return changed ? this.persist(tx, [changed], sourceId, true) : [];
  }
}

/** A thought row as clients get it: the full current state of the row. */
export function thoughtEventData(msg: TurnMessage, r: ThoughtRow): ClientEventInput<'agent_thought'> {
  return {
    ...turnEventBase(msg),
    event: 'agent_thought',
    id: r.id,
    position: r.position,
    thought: r.thought,
    observation: r.observation,
    tool: r.tool,
    tool_labels: r.tool_labels,
    tool_input: r.tool_input,
    message_files: r.message_files,
  };
}

function toThoughtRow(r: Prisma.MessageAgentThoughtModel): ThoughtRow {
  return {
    id: r.id,
    position: r.position,
    kind: r.kind as ThoughtRow['kind'],
    thought: r.thought,
    tool: r.tool,
    tool_labels: (r.tool_labels ?? {}) as Record<string, unknown>,
    tool_input: r.tool_input,
    observation: r.observation,
    tool_call_id: r.tool_call_id,
    part_index: r.part_index,
    message_files: (r.message_files ?? []) as string[],
    call_index: r.call_index,
    tool_meta: (r.tool_meta ?? {}) as Record<string, unknown>,
    closed: r.observation !== '',
  };
}
