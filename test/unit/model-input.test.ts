/**
 * core/domain/llm/model-input.ts (issue 42, the inspector's context view): a request's prompt split into the parts a
 * person reads, each with the api tokenizer's count of its whole text, and a stored text that PostgreSQL's jsonb takes.
 */
import { describe, expect, it } from 'vitest';
import { modelInputParts, PART_TEXT_CHARS } from '../../core/domain/llm/model-input.js';
import { countTokens } from '../../core/domain/llm/tokens.js';
import type { PromptMessage } from '../../core/protocol/inner-llm.js';

const wellFormed = (s: string) => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

describe('modelInputParts', () => {
  it('splits history, the user text, the knowledge block, tool calls, results and tools, each with its own count', () => {
    const knowledge = '<knowledge_context>\n[1] Ada wrote the first program.\n</knowledge_context>';
    const messages: PromptMessage[] = [
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi there' },
      { role: 'user', content: `Who was Ada?\n\n${knowledge}` },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calc', arguments: '{"e":"6*7"}' } }],
      },
      { role: 'tool', content: '42', tool_call_id: 'c1', name: 'calc' },
    ];
    const parts = modelInputParts(messages, [{ name: 'calc', description: 'Computes', parameters: { type: 'object' } }]);
    expect(parts.map((p) => [p.kind, p.role, p.name])).toEqual([
      ['system', 'system', null],
      ['history', 'user', null],
      ['history', 'assistant', null],
      ['user', 'user', null],
      ['knowledge', 'user', null],
      ['assistant', 'assistant', null],
      ['tool_result', 'tool', 'calc'],
      ['tools', null, null],
    ]);
    expect(parts[3]!.text).toBe('Who was Ada?');
    expect(parts[4]!.text).toBe(knowledge);
    expect(parts[5]!.text).toBe('calc({"e":"6*7"})');
    for (const p of parts) expect(p.tokens).toBe(countTokens(p.text));
  });

  it('folds history beyond 60 messages into one part that counts them all', () => {
    const messages: PromptMessage[] = [];
    for (let i = 0; i < 70; i++) messages.push({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}` });
    messages.push({ role: 'user', content: 'now' });
    const parts = modelInputParts(messages);
    expect(parts).toHaveLength(1 + 60 + 1);
    expect(parts[0]).toMatchObject({ kind: 'history', role: null, text: '(10 earlier messages)' });
    const older = Array.from({ length: 10 }, (_, i) => countTokens(`message ${i}`)).reduce((a, b) => a + b, 0);
    expect(parts[0]!.tokens).toBe(older);
  });

  it('caps a long text for storage but counts the whole of it', () => {
    const text = 'word '.repeat(2000);
    const [p] = modelInputParts([{ role: 'user', content: text }]);
    expect(p!.text).toHaveLength(PART_TEXT_CHARS);
    expect(p!.chars).toBe(text.length);
    expect(p!.tokens).toBe(countTokens(text));
  });

  it('never cuts a surrogate pair in half at the cap, so jsonb takes the stored text', () => {
    // An emoji across the cap: a cut at PART_TEXT_CHARS would leave a lone high surrogate, which jsonb refuses.
    const text = 'a'.repeat(PART_TEXT_CHARS - 1) + '\u{1F600}' + 'tail';
    const [p] = modelInputParts([{ role: 'user', content: text }]);
    expect(wellFormed(p!.text)).toBe(true);
    expect(p!.text).toBe('a'.repeat(PART_TEXT_CHARS - 1));
  });

  it('replaces NUL and lone surrogates from tool output', () => {
    const parts = modelInputParts([
      { role: 'user', content: 'run it' },
      { role: 'tool', content: 'a\u0000b\ud800c', tool_call_id: 't', name: 'shell' },
    ]);
    expect(parts[1]!.text).toBe('a\ufffdb\ufffdc');
    expect(wellFormed(parts[1]!.text)).toBe(true);
  });

  it('notes an image instead of its bytes', () => {
    const [p] = modelInputParts([
      {
        role: 'user',
        content: [
          { type: 'text', data: 'look' },
          { type: 'image', base64_data: 'AAAA', mime_type: 'image/png' },
        ],
      },
    ]);
    expect(p!.text).toBe('look\n[image]');
  });
});
