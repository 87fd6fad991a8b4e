/** The process recorder (docs/seeds/001): thinking and tool rows, correlation of results, reattach. */
import { describe, expect, it } from 'vitest';
import { observationText, ProcessRecorder, trimAnswerSuffix } from '../../activities/process-recorder.js';

describe('ProcessRecorder', () => {
  it('records thinking as one row per part index and appends its deltas', () => {
    const r = new ProcessRecorder();
    r.handle({ event_kind: 'part_start', index: 0, part: { part_kind: 'thinking', content: 'Let me ' } });
    const [row] = r.handle({ event_kind: 'part_delta', index: 0, delta: { part_delta_kind: 'thinking', content_delta: 'think.' } });
    expect(row).toMatchObject({ kind: 'thinking', position: 1, thought: 'Let me think.' });
    expect(r.all).toHaveLength(1);
  });

  it('correlates tool results by tool_call_id even when they arrive out of order', () => {
    const r = new ProcessRecorder();
    r.handle({ event_kind: 'function_tool_call', index: 1, tool_call_id: 'a', tool_name: 'calculator', args: { expression: '1+1' } });
    r.handle({ event_kind: 'function_tool_call', index: 2, tool_call_id: 'b', tool_name: 'calculator', args: { expression: '2+2' } });
    r.handle({ event_kind: 'function_tool_result', tool_call_id: 'b', tool_name: 'calculator', result: { result: 4 } });
    r.handle({ event_kind: 'function_tool_result', tool_call_id: 'a', tool_name: 'calculator', result: 'two' });
    expect(r.all.map((t) => [t.position, t.tool_call_id, t.tool_input, t.observation])).toEqual([
      [1, 'a', '{"expression":"1+1"}', 'two'],
      [2, 'b', '{"expression":"2+2"}', '{"result":4}'],
    ]);
  });

  it('falls back to the part index, then to the open call of the same tool name', () => {
    const r = new ProcessRecorder();
    r.handle({ event_kind: 'function_tool_call', index: 3, tool_name: 'current_time', args: {} });
    r.handle({ event_kind: 'function_tool_result', index: 3, result: '12:00' });
    r.handle({ event_kind: 'function_tool_call', tool_name: 'scratchpad_get', args: { key: 'k' } });
    r.handle({ event_kind: 'function_tool_result', tool_name: 'scratchpad_get', result: 'v' });
    expect(r.all.map((t) => [t.tool, t.observation])).toEqual([
      ['current_time', '12:00'],
      ['scratchpad_get', 'v'],
    ]);
  });

  it('builds tool input from streamed args deltas and keeps tool files as message files', () => {
    const r = new ProcessRecorder();
    r.handle({ event_kind: 'part_start', index: 0, part: { part_kind: 'tool-call', tool_name: 'render', tool_call_id: 'c' } });
    r.handle({ event_kind: 'part_delta', index: 0, delta: { part_delta_kind: 'tool_call', args_delta: '{"a":' } });
    r.handle({ event_kind: 'part_delta', index: 0, delta: { part_delta_kind: 'tool_call', args_delta: '1}' } });
    const [row] = r.handle({ event_kind: 'function_tool_result', tool_call_id: 'c', result: 'ok', files: [{ url: 'https://x/f.png' }] });
    expect(row).toMatchObject({ tool: 'render', tool_input: '{"a":1}', observation: 'ok', message_files: ['https://x/f.png'] });
  });

  it('continues from stored rows after a reattach without creating duplicates', () => {
    const first = new ProcessRecorder();
    first.handle({ event_kind: 'function_tool_call', index: 1, tool_call_id: 'a', tool_name: 'calculator', args: {} });
    const stored = first.all.map((t) => ({ ...t }));
    const again = new ProcessRecorder(stored);
    const [row] = again.handle({ event_kind: 'function_tool_result', tool_call_id: 'a', result: 42 });
    expect(row!.id).toBe(stored[0]!.id);
    expect(again.all).toHaveLength(1);
    expect(row!.observation).toBe('42');
  });

  it('renders observations as text or JSON', () => {
    expect(observationText('plain')).toBe('plain');
    expect(observationText({ a: 1 })).toBe('{"a":1}');
    expect(observationText(null)).toBe('');
  });

  it('holds an answer row until a later row proves it was not the final answer, then trims the final one', () => {
    const r = new ProcessRecorder();
    const [first] = r.handle({ event_kind: 'part_end', index: 0, part: { part_kind: 'text', content: 'Let me calculate that.' } });
    expect(first).toMatchObject({ kind: 'answer', thought: 'Let me calculate that.' });
    expect(r.isHeld(first!)).toBe(true);
    r.handle({ event_kind: 'function_tool_call', index: 1, tool_call_id: 'a', tool_name: 'calculator', args: {} });
    expect(r.isHeld(first!)).toBe(false);
    r.handle({ event_kind: 'function_tool_result', tool_call_id: 'a', result: 42 });
    r.handle({ event_kind: 'part_end', index: 2, part: { part_kind: 'text', content: 'The calculator says 42.' } });
    // The last text is the final answer: trimmed away entirely, never stored twice.
    const { removed } = r.finishAnswer('The calculator says 42.');
    expect(removed?.thought).toBe('The calculator says 42.');
    expect(r.all.map((t) => [t.kind, t.thought || t.tool])).toEqual([
      ['answer', 'Let me calculate that.'],
      ['tool', 'calculator'],
    ]);
  });

  it('trims only the overlap with the final answer', () => {
    expect(trimAnswerSuffix('Thinking aloud. The answer is 4', 'The answer is 4.')).toBe('Thinking aloud.');
    expect(trimAnswerSuffix('same text', 'same text')).toBe('');
    expect(trimAnswerSuffix('unrelated', 'final')).toBe('unrelated');
    expect(trimAnswerSuffix('kept', '')).toBe('kept');
  });

  it('keeps a held answer row the final answer merely contains (issue 18: only the overlap goes)', () => {
    // "is 4" appears inside the final answer but is not where it begins: nothing overlaps, nothing goes.
    expect(trimAnswerSuffix('is 4', 'The answer is 4.')).toBe('is 4');
    expect(trimAnswerSuffix('Checking: the answer', 'So the answer is 4.')).toBe('Checking: the answer');
    // Trailing whitespace of the streamed text does not hide an overlap.
    expect(trimAnswerSuffix('Note. The answer is 4  ', 'The answer is 4.')).toBe('Note.');
    const r = new ProcessRecorder();
    r.handle({ event_kind: 'part_end', index: 0, part: { part_kind: 'text', content: 'answer' } });
    const { changed, removed } = r.finishAnswer('The final answer is 42.');
    expect(removed).toBeUndefined();
    expect(changed?.thought).toBe('answer');
  });

  it('tags each row with the model request that produced it and tool rows with their time cost', () => {
    const r = new ProcessRecorder();
    r.handle({
      event_kind: 'part_start',
      index: 0,
      part: { part_kind: 'tool-call', tool_name: 'calculator', tool_call_id: 'c1', args: {} },
    });
    r.handle({ event_kind: 'model_response', call_index: 0 });
    r.handle({ event_kind: 'function_tool_result', tool_call_id: 'c1', result: 'Cannot evaluate', is_error: true, duration_ms: 1500 });
    r.handle({ event_kind: 'part_start', index: 1, part: { part_kind: 'thinking', content: 'hm' } });
    expect(r.all.map((t) => [t.kind, t.call_index])).toEqual([
      ['tool', 0],
      ['thinking', 1],
    ]);
    expect(r.all[0].tool_meta).toEqual({ time_cost: 1.5, error: 'Cannot evaluate' });
    // Rebuilt after a lost attempt: the next request's rows continue from the recorded calls.
    const rebuilt = new ProcessRecorder(r.all.slice(0, 1), 1);
    rebuilt.handle({ event_kind: 'part_start', index: 1, part: { part_kind: 'thinking', content: 'hm' } });
    expect(rebuilt.all.at(-1)!.call_index).toBe(1);
  });
});
