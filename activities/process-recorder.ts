/**
 * The process recorder (docs/seeds/001 _AgentProcessRecorder): turns the backend's agent stream events into
 * MessageAgentThought rows — thinking rows, answer rows (text the model wrote, e.g. before a tool call) and
 * tool rows — each change returned whole so the caller can persist it and publish an `agent_thought` event
 * with the full row. The last answer row is held back from clients (`isHeld`) until a later row proves it
 * was not the final answer; at the end `trimAnswerSuffix` removes its overlap with the authoritative
 * answer, so the final text is never stored twice. Tool results are correlated to their
 * call by tool_call_id, else by part index, else by the open call of the same tool name, so results that
 * arrive out of order land on the right row. State is rebuilt from stored rows when a retried activity
 * reattaches to a run.
 */
import crypto from 'node:crypto';
import type { AgentStreamEvent } from '../core/protocol/run.js';

export interface ThoughtRow {
  id: string;
  position: number;
  kind: 'thinking' | 'answer' | 'tool';
  thought: string;
  tool: string;
  tool_labels: Record<string, unknown>;
  tool_input: string;
  observation: string;
  tool_call_id: string | null;
  part_index: number | null;
  message_files: string[];
  /** The model request (0-based call_index) whose response produced the row; null for rows of older runs. */
  call_index: number | null;
  /** Tool rows: Dify's tool_meta, {time_cost (s), error}. */
  tool_meta: Record<string, unknown>;
  /** true once the tool's result arrived (not persisted separately: observation !== '' or closed). */
  closed: boolean;
}

export function observationText(result: unknown): string {
  if (result === undefined || result === null) return '';
  if (typeof result === 'string') return result;
  try {
    return JSON.stringify(result);
  } catch {
    return String(result);
  }
}

export class ProcessRecorder {
  private readonly rows: ThoughtRow[];
  private readonly byCallId = new Map<string, ThoughtRow>();
  private readonly toolByIndex = new Map<number, ThoughtRow>();
  private readonly thinkingByIndex = new Map<number, ThoughtRow>();
  /** The model request whose response is streaming: rows created now belong to it (`model_response` moves it on). */
  private round: number;

  /** `round`: the next model request's call_index (one past the last recorded model call), when rebuilding. */
  constructor(existing: ThoughtRow[] = [], round = 0) {
    this.rows = [...existing].sort((a, b) => a.position - b.position);
    for (const r of this.rows) this.index(r);
    this.round = round;
  }

  get all(): readonly ThoughtRow[] {
    return this.rows;
  }

  private index(r: ThoughtRow): void {
    if (r.kind === 'tool') {
      if (r.tool_call_id) this.byCallId.set(r.tool_call_id, r);
      if (r.part_index !== null) this.toolByIndex.set(r.part_index, r);
    } else if (r.kind === 'thinking' && r.part_index !== null) {
      this.thinkingByIndex.set(r.part_index, r);
    }
  }

  /** The last row, when it is an answer row: it may still turn out to be the final answer. */
  heldAnswer(): ThoughtRow | undefined {
    const last = this.rows[this.rows.length - 1];
    return last?.kind === 'answer' ? last : undefined;
  }

  isHeld(row: ThoughtRow): boolean {
    return this.heldAnswer() === row;
  }

  /**
   * docs/seeds/001 trim_answer_suffix at the end of a run: the held answer row loses its overlap with the final
   * answer. Returns the row (changed) or, when nothing is left, removes it and returns `{removed}`.
   */
  finishAnswer(finalAnswer: string): { changed?: ThoughtRow; removed?: ThoughtRow } {
    const row = this.heldAnswer();
    if (!row) return {};
    const kept = trimAnswerSuffix(row.thought, finalAnswer);
    if (kept === '') {
      this.rows.pop();
      return { removed: row };
    }
    row.thought = kept;
    return { changed: row };
  }

  private create(kind: ThoughtRow['kind'], init: Partial<ThoughtRow>): ThoughtRow {
    const r: ThoughtRow = {
      id: crypto.randomUUID(),
      position: this.rows.length + 1,
      kind,
      thought: '',
      tool: '',
      tool_labels: {},
      tool_input: '',
      observation: '',
      tool_call_id: null,
      part_index: null,
      message_files: [],
      call_index: this.round,
      tool_meta: {},
      closed: false,
      ...init,
    };
    this.rows.push(r);
    this.index(r);
    return r;
  }

  private findToolRow(ev: { tool_call_id?: string; index?: number; tool_name?: string }, openOnly: boolean): ThoughtRow | undefined {
    if (ev.tool_call_id && this.byCallId.has(ev.tool_call_id)) return this.byCallId.get(ev.tool_call_id);
    if (ev.index !== undefined) {
      const r = this.toolByIndex.get(ev.index);
      if (r && (!openOnly || !r.closed) && (!ev.tool_call_id || !r.tool_call_id)) return r;
    }
    if (ev.tool_name) return this.rows.find((r) => r.kind === 'tool' && r.tool === ev.tool_name && !r.closed);
    return undefined;
  }

  /** Applies one stream event; returns the rows it created or changed (full state). */
  handle(ev: AgentStreamEvent): ThoughtRow[] {
    switch (ev.event_kind) {
      case 'part_start': {
        const p = ev.part;
        if (!p) return [];
        if (p.part_kind === 'thinking') {
          const r = this.create('thinking', { part_index: ev.index ?? null, thought: typeof p.content === 'string' ? p.content : '' });
          return [r];
        }
        if (p.part_kind === 'tool-call') {
          const existing = this.findToolRow({ tool_call_id: p.tool_call_id, index: undefined }, false);
          if (existing) return [];
          const r = this.create('tool', {
            part_index: ev.index ?? null,
            tool: p.tool_name ?? '',
            tool_call_id: p.tool_call_id ?? null,
            tool_input: p.args === undefined ? '' : typeof p.args === 'string' ? p.args : JSON.stringify(p.args),
          });
          return [r];
        }
        return [];
      }
      case 'part_end': {
        const p = ev.part;
        if (p?.part_kind !== 'text' || typeof p.content !== 'string' || p.content === '') return [];
        return [this.create('answer', { part_index: ev.index ?? null, thought: p.content })];
      }
      case 'part_delta': {
        const d = ev.delta;
        if (!d || ev.index === undefined) return [];
        if (d.part_delta_kind === 'thinking' && d.content_delta) {
          const r = this.thinkingByIndex.get(ev.index) ?? this.create('thinking', { part_index: ev.index });
          r.thought += d.content_delta;
          return [r];
        }
        if (d.part_delta_kind === 'tool_call' && d.args_delta) {
          const r = this.toolByIndex.get(ev.index);
          if (!r || r.closed) return [];
          r.tool_input += d.args_delta;
          return [r];
        }
        return [];
      }
      case 'function_tool_call':
      case 'output_tool_call': {
        const name = ev.tool_name ?? ev.part?.tool_name ?? '';
        const callId = ev.tool_call_id ?? ev.part?.tool_call_id;
        const args = ev.args ?? ev.part?.args;
        const r =
          this.findToolRow({ tool_call_id: callId, index: ev.index }, true) ?? this.create('tool', { part_index: ev.index ?? null });
        r.tool = name || r.tool;
        if (callId && !r.tool_call_id) {
          r.tool_call_id = callId;
          this.byCallId.set(callId, r);
        }
        if (args !== undefined) r.tool_input = typeof args === 'string' ? args : JSON.stringify(args);
        return [r];
      }
      case 'function_tool_result':
      case 'output_tool_result': {
        const callId = ev.tool_call_id ?? ev.part?.tool_call_id;
        const name = ev.tool_name ?? ev.part?.tool_name;
        const r =
          this.findToolRow({ tool_call_id: callId, index: ev.index, tool_name: name }, true) ??
          this.create('tool', { tool: name ?? '', tool_call_id: callId ?? null, part_index: ev.index ?? null });
        r.observation = observationText(ev.result ?? ev.part?.content);
        r.closed = true;
        if (ev.duration_ms !== undefined || ev.is_error) {
          r.tool_meta = { ...r.tool_meta, time_cost: (ev.duration_ms ?? 0) / 1000, error: ev.is_error ? r.observation : null };
        }
        // By now each url is a MessageFile id (activities/run-agent/tool-files.ts); a replayed event adds none twice.
        if (ev.files?.length) r.message_files = [...new Set([...r.message_files, ...ev.files.map((f) => f.url)])];
        return [r];
      }
      case 'model_response':
        if (ev.call_index !== undefined) this.round = Math.max(this.round, ev.call_index + 1);
        return [];
      default:
        return [];
    }
  }
}

/**
 * Removes the overlap between streamed answer text and the final answer (docs/seeds/001): the longest suffix of
 * the text that begins the final answer — all of the text only when all of it is that overlap. Text the
 * final answer merely contains elsewhere is not overlap and stays.
 */
export function trimAnswerSuffix(text: string, finalAnswer: string): string {
  if (!finalAnswer) return text;
  const t = text.trimEnd();
  for (let k = Math.min(t.length, finalAnswer.length); k > 0; k--) {
    if (t.endsWith(finalAnswer.slice(0, k))) return t.slice(0, t.length - k).trimEnd();
  }
  return text;
}
