import { describe, expect, it } from 'vitest';
import { toCallOptions, toPrompt } from './request.js';

describe('request mapping', () => {
  it('sends an assistant message’s provider metadata back as each part’s providerOptions, unchanged', () => {
    const prompt = toPrompt([
      { role: 'user', content: 'Hi' },
      {
        role: 'assistant',
        content: 'Calling.',
        reasoning_content: 'Think.',
        reasoning_parts: [
          { text: 'Think.', provider_metadata: { anthropic: { signature: 'SIG-1' } } },
          { text: '', provider_metadata: { anthropic: { redactedData: 'R-1' } } },
        ],
        content_provider_metadata: { google: { thoughtSignature: 'TS-text' } },
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'calculator', arguments: '{}' },
            provider_metadata: { google: { thoughtSignature: 'TS-call' } },
          },
        ],
      },
    ]);
    expect(prompt[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: 'Think.', providerOptions: { anthropic: { signature: 'SIG-1' } } },
        { type: 'reasoning', text: '', providerOptions: { anthropic: { redactedData: 'R-1' } } },
        { type: 'text', text: 'Calling.', providerOptions: { google: { thoughtSignature: 'TS-text' } } },
        {
          type: 'tool-call',
          toolCallId: 'c1',
          toolName: 'calculator',
          input: {},
          providerOptions: { google: { thoughtSignature: 'TS-call' } },
        },
      ],
    });
  });

  it('maps every role: images as file parts, tool calls with parsed input, consecutive tool results in one message', () => {
    const prompt = toPrompt([
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', data: 'What is this?' },
          { type: 'image', base64_data: 'iVBOR', mime_type: 'image/png' },
          { type: 'image', url: 'https://example.com/a.jpg' },
          { type: 'image', url: 'data:image/webp;base64,UklG' },
        ],
      },
      {
        role: 'assistant',
        content: '',
        reasoning_content: 'Two tools.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"6*7"}' } },
          { id: 'c2', type: 'function', function: { name: 'current_time', arguments: '' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: '42' },
      { role: 'tool', tool_call_id: 'c2', content: 'noon' },
    ]);
    expect(prompt[0]).toEqual({ role: 'system', content: 'Be brief.' });
    const user = prompt[1] as { content: { type: string; data?: unknown; mediaType?: string }[] };
    expect(user.content[1]).toEqual({ type: 'file', data: 'iVBOR', mediaType: 'image/png' });
    expect(user.content[2]!.data).toBeInstanceOf(URL);
    expect(user.content[3]).toEqual({ type: 'file', data: 'UklG', mediaType: 'image/webp' });
    expect(prompt[2]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: 'Two tools.' },
        { type: 'tool-call', toolCallId: 'c1', toolName: 'calculator', input: { expression: '6*7' } },
        { type: 'tool-call', toolCallId: 'c2', toolName: 'current_time', input: {} },
      ],
    });
    expect(prompt).toHaveLength(4);
    expect(prompt[3]).toEqual({
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'c1', toolName: 'calculator', output: { type: 'text', value: '42' } },
        { type: 'tool-result', toolCallId: 'c2', toolName: 'current_time', output: { type: 'text', value: 'noon' } },
      ],
    });
  });

  it('forwards only the whitelisted settings, under the AI SDK names, and the tools', () => {
    const signal = new AbortController().signal;
    const o = toCallOptions({
      prompt_messages: [{ role: 'user', content: 'hi' }],
      tools: [{ name: 'calculator', description: 'math', parameters: { type: 'object' } }],
      model_parameters: {
        temperature: 0.2,
        top_p: 0.9,
        max_tokens: 256.7,
        stop_sequences: ['END'],
        seed: 7,
        presence_penalty: 0.1,
        junk: 1,
      },
      signal,
    });
    expect(o).toMatchObject({ temperature: 0.2, topP: 0.9, maxOutputTokens: 256, stopSequences: ['END'], seed: 7, presencePenalty: 0.1 });
    expect(o.abortSignal).toBe(signal);
    expect(o.tools).toEqual([{ type: 'function', name: 'calculator', description: 'math', inputSchema: { type: 'object' } }]);
    expect(o).not.toHaveProperty('junk');
    expect(
      toCallOptions({ prompt_messages: [{ role: 'user', content: 'x' }], tools: [], model_parameters: {}, signal }).tools,
    ).toBeUndefined();
  });
});
