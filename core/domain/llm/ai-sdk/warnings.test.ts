import { describe, expect, it } from 'vitest';
import { answerParts, overloadedParts, scriptedModel, scriptedProvider } from '../../../../test/llm/fake-language-model.js';
import type { ProviderWarning } from '../provider.js';
import { toProviderWarning } from './warnings.js';

const DROPPED = { type: 'unsupported', feature: 'stopSequences', details: 'the Responses API takes no stop sequences' } as const;

async function call(model: ReturnType<typeof scriptedModel>) {
  const reported: ProviderWarning[][] = [];
  let text = '';
  for await (const ev of scriptedProvider(model).invoke({
    model: 'gpt-4o-mini',
    prompt_messages: [{ role: 'user', content: 'Hi' }],
    tools: [],
    model_parameters: { stop_sequences: ['END'] },
    credentials: null,
    signal: new AbortController().signal,
    onWarnings: (w) => reported.push(w),
  }))
    if (ev.type === 'delta') text += ev.content ?? '';
  return { reported, text };
}

describe('the AI SDK’s call warnings', () => {
  it('reach the caller once per call, from the stream-start part, also when the call was retried', async () => {
    const model = scriptedModel([overloadedParts([DROPPED]), answerParts('Hello', [DROPPED])]);
    const { reported, text } = await call(model);
    expect(model.calls).toBe(2);
    expect(text).toBe('Hello');
    expect(reported).toEqual([[DROPPED]]);
    // A call without warnings reports none.
    expect((await call(scriptedModel([answerParts('Hello')]))).reported).toEqual([]);
  });

  it('map to the gateway’s warning: the setting named, an `other` warning’s message as its details', () => {
    expect(toProviderWarning({ type: 'compatibility', feature: 'tools' })).toEqual({ type: 'compatibility', feature: 'tools' });
    expect(toProviderWarning({ type: 'other', message: 'seed ignored' })).toEqual({ type: 'other', details: 'seed ignored' });
  });
});
