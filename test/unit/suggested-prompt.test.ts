/**
 * The suggested-questions request and the reading of its answer (core/domain/llm/suggested-prompt.ts): the last three
 * exchanges of the thread under the instruction, a model's array found inside prose or a code fence, and the demo
 * model's deterministic answer to exactly this request (and only to it).
 */
import { describe, expect, it } from 'vitest';
import {
  isSuggestedQuestionsPrompt,
  parseSuggestedQuestions,
  suggestedQuestionsPrompt,
  SUGGESTED_QUESTIONS_MARKER,
} from '../../core/domain/llm/suggested-prompt.js';
import { planDemoReply } from '../../core/domain/llm/providers/demo.js';

describe('suggested questions prompt', () => {
  it('sends the last three exchanges under the instruction', () => {
    const exchanges = ['one', 'two', 'three', 'four'].map((q) => ({ query: q, answer: `answer to ${q}` }));
    const [system, user] = suggestedQuestionsPrompt(exchanges);
    expect(system).toMatchObject({ role: 'system' });
    expect((system!.content as string).startsWith(SUGGESTED_QUESTIONS_MARKER)).toBe(true);
    const text = user!.content as string;
    expect(text).not.toContain('User: one');
    expect(text).toContain('User: two\nAssistant: answer to two');
    expect(text.trim().endsWith('User: four\nAssistant: answer to four')).toBe(true);
  });

  it("reads the array out of a model's prose, drops blanks, repeats and non-strings, keeps three", () => {
    expect(parseSuggestedQuestions('Sure! ```json\n["A?", " B? ", "A?", 3, "", "C?", "D?"]\n```')).toEqual(['A?', 'B?', 'C?']);
    expect(parseSuggestedQuestions('no array here')).toEqual([]);
    expect(parseSuggestedQuestions('[not json]')).toEqual([]);
    expect(parseSuggestedQuestions('{"a": [1]}')).toEqual([]);
  });

  it('is what the demo model answers with three questions naming the latest query, and nothing else triggers it', () => {
    const prompt = suggestedQuestionsPrompt([{ query: 'What is a workflow?', answer: 'A durable function.' }]);
    expect(isSuggestedQuestionsPrompt(prompt)).toBe(true);
    expect(JSON.parse(planDemoReply(prompt, []).text)).toEqual([
      'Tell me more about: What is a workflow?',
      'Can you give an example?',
      'What should I ask next?',
    ]);
    // The user typing the instruction is an ordinary message.
    const typed = [{ role: 'user' as const, content: SUGGESTED_QUESTIONS_MARKER }];
    expect(isSuggestedQuestionsPrompt(typed)).toBe(false);
    expect(planDemoReply(typed, []).text).toMatch(/^You said:/);
  });
});
