import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { InvokeError } from '../errors.js';
import type { ProviderEvent } from '../provider.js';
import { toProviderEvents } from './stream-parts.js';

const streamOf = (parts: LanguageModelV3StreamPart[]) =>
  new ReadableStream<LanguageModelV3StreamPart>({
    start(c) {
      for (const p of parts) c.enqueue(p);
      c.close();
    },
  });
const collect = async (parts: LanguageModelV3StreamPart[]) => {
  const out: ProviderEvent[] = [];
  for await (const ev of toProviderEvents(streamOf(parts))) out.push(ev);
  return out;
};
const usage = {
  inputTokens: { total: 20, noCache: 12, cacheRead: 8, cacheWrite: undefined },
  outputTokens: { total: 10, text: 7, reasoning: 3 },
};

describe('stream-part mapping', () => {
  it('passes text and reasoning deltas through and ends with the finish reason and usage', async () => {
    const events = await collect([
      { type: 'stream-start', warnings: [] },
      { type: 'reasoning-start', id: 'r' },
      { type: 'reasoning-delta', id: 'r', delta: 'Hmm.' },
      { type: 'reasoning-end', id: 'r' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'Hel' },
      { type: 'text-delta', id: 't', delta: 'lo' },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'end_turn' }, usage },
    ]);
    expect(events).toEqual([
      { type: 'delta', reasoning_content: 'Hmm.' },
      { type: 'delta', reasoning_parts: [{ text: 'Hmm.' }] },
      { type: 'delta', content: 'Hel' },
      { type: 'delta', content: 'lo' },
      {
        type: 'finish',
        finish_reason: 'stop',
        usage: { prompt_tokens: 20, completion_tokens: 10, cached_prompt_tokens: 8, reasoning_tokens: 3 },
      },
    ]);
  });

  it('sends a tool call whole once complete, from its streamed argument fragments', async () => {
    const events = await collect([
      { type: 'tool-input-start', id: 'c1', toolName: 'calculator' },
      { type: 'tool-input-delta', id: 'c1', delta: '{"expres' },
      { type: 'tool-input-delta', id: 'c1', delta: 'sion":"6*7"}' },
      { type: 'tool-input-end', id: 'c1' },
      { type: 'tool-call', toolCallId: 'c1', toolName: 'calculator', input: '' },
      { type: 'tool-call', toolCallId: 'c2', toolName: 'current_time', input: '{}' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'STOP' }, usage },
    ]);
    expect(events.slice(0, 2)).toEqual([
      { type: 'delta', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"6*7"}' } }] },
      { type: 'delta', tool_calls: [{ id: 'c2', type: 'function', function: { name: 'current_time', arguments: '{}' } }] },
    ]);
    // Gemini and Ollama say `stop` after a tool call.
    expect(events[2]).toMatchObject({ type: 'finish', finish_reason: 'tool_calls' });
  });

  it('sends each reasoning block whole with the metadata the provider needs back (Anthropic signature, redacted block)', async () => {
    const events = await collect([
      { type: 'reasoning-start', id: '0' },
      { type: 'reasoning-delta', id: '0', delta: 'Let me ' },
      { type: 'reasoning-delta', id: '0', delta: 'think.' },
      { type: 'reasoning-delta', id: '0', delta: '', providerMetadata: { anthropic: { signature: 'SIG-1' } } },
      { type: 'reasoning-end', id: '0' },
      { type: 'reasoning-start', id: '1', providerMetadata: { anthropic: { redactedData: 'REDACTED-1' } } },
      { type: 'reasoning-end', id: '1' },
      {
        type: 'tool-call',
        toolCallId: 'c1',
        toolName: 'calculator',
        input: '{}',
        providerMetadata: { google: { thoughtSignature: 'TS' } },
      },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_use' }, usage },
    ]);
    expect(events.filter((e) => e.type === 'delta' && e.reasoning_parts)).toEqual([
      { type: 'delta', reasoning_parts: [{ text: 'Let me think.', provider_metadata: { anthropic: { signature: 'SIG-1' } } }] },
      { type: 'delta', reasoning_parts: [{ text: '', provider_metadata: { anthropic: { redactedData: 'REDACTED-1' } } }] },
    ]);
    expect(events.find((e) => e.type === 'delta' && e.tool_calls)).toMatchObject({
      tool_calls: [{ id: 'c1', provider_metadata: { google: { thoughtSignature: 'TS' } } }],
    });
  });

  it('merges an OpenAI reasoning item’s metadata from its start and end, and the text’s thought signature', async () => {
    const events = await collect([
      { type: 'reasoning-start', id: 'rs_1:0', providerMetadata: { openai: { itemId: 'rs_1', reasoningEncryptedContent: null } } },
      { type: 'reasoning-end', id: 'rs_1:0', providerMetadata: { openai: { itemId: 'rs_1', reasoningEncryptedContent: 'ENC' } } },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'Hi', providerMetadata: { google: { thoughtSignature: 'TS-text' } } },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
    ]);
    expect(events.slice(0, 2)).toEqual([
      {
        type: 'delta',
        reasoning_parts: [{ text: '', provider_metadata: { openai: { itemId: 'rs_1', reasoningEncryptedContent: 'ENC' } } }],
      },
      { type: 'delta', content: 'Hi', content_provider_metadata: { google: { thoughtSignature: 'TS-text' } } },
    ]);
    expect(events[2]).toMatchObject({ type: 'finish' });
  });

  it('reports no usage when the provider gave none, throws an error part, and a stream without finish', async () => {
    const none = await collect([
      {
        type: 'finish',
        finishReason: { unified: 'length', raw: 'length' },
        usage: {
          inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: undefined, text: undefined, reasoning: undefined },
        },
      },
    ]);
    expect(none).toEqual([{ type: 'finish', finish_reason: 'length', usage: null }]);
    await expect(collect([{ type: 'error', error: new Error('overloaded') }])).rejects.toThrow('overloaded');
    const cut = collect([{ type: 'text-delta', id: 't', delta: 'Hi' }]);
    await expect(cut).rejects.toBeInstanceOf(InvokeError);
    await expect(cut).rejects.toMatchObject({ errorType: 'InvokeConnectionError' });
  });
});
