/**
 * Provider metadata through the agent backend's model adapter (docs/models.md "Provider metadata that must
 * round-trip"): the inner endpoint's reasoning blocks and thought signatures come out of the part stream on the finish
 * and tool-call parts, and history → AI SDK messages → the V3 prompt streamText builds → inner request is lossless
 * for them, as streamText itself converts the messages.
 */
import type { LanguageModelV3CallOptions, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { streamText } from 'ai';
import { describe, expect, it } from 'vitest';
import type { InvokeChunk, PromptMessage } from '../../core/protocol/inner-llm.js';
import { assistantMetadataOf, toolCallMetadataOf, toPartStream } from '../../agent-backend/model/part-stream.js';
import { fromV3Prompt, toModelMessages } from '../../agent-backend/model/prompt.js';
import { RetryBudget } from '../../agent-backend/model/retry.js';

async function* framesOf(chunks: InvokeChunk[]) {
  for (const c of chunks) yield { data: JSON.stringify(c) };
}
const chunk = (message: Record<string, unknown>, extra: Record<string, unknown> = {}): InvokeChunk =>
  ({ code: 0, message: '', data: { model: 'm', delta: { index: 0, message: { content: '', ...message }, ...extra } } }) as InvokeChunk;

async function partsOf(chunks: InvokeChunk[]): Promise<LanguageModelV3StreamPart[]> {
  const stream = toPartStream(
    framesOf(chunks),
    async () => {
      throw new Error('no retry expected');
    },
    new RetryBudget({ budgetMs: 0, baseMs: 1, maxMs: 1 }),
    undefined,
  );
  const out: LanguageModelV3StreamPart[] = [];
  for await (const p of stream as unknown as AsyncIterable<LanguageModelV3StreamPart>) out.push(p);
  return out;
}

const SIGNED: PromptMessage = {
  role: 'assistant',
  content: 'Let me compute.',
  reasoning_content: 'Think.',
  reasoning_parts: [
    { text: 'Think.', provider_metadata: { anthropic: { signature: 'SIG/+=1' } } },
    { text: '', provider_metadata: { anthropic: { redactedData: 'R-1' } } },
  ],
  content_provider_metadata: { google: { thoughtSignature: 'TS-text' } },
  tool_calls: [
    {
      id: 'c1',
      type: 'function',
      function: { name: 'calculator', arguments: '{"expression":"6*7"}' },
      provider_metadata: { google: { thoughtSignature: 'TS-call' } },
    },
  ],
};

describe('provider metadata in the agent backend', () => {
  it('the part stream hands the finished attempt’s reasoning blocks and each call’s metadata to the loop', async () => {
    const parts = await partsOf([
      chunk({ reasoning_content: 'Think.' }),
      chunk({ reasoning_parts: [{ text: 'Think.', provider_metadata: { anthropic: { signature: 'SIG-1' } } }] }),
      chunk({ content: 'Hi', content_provider_metadata: { google: { thoughtSignature: 'TS-text' } } }),
      chunk({
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'calculator', arguments: '{}' },
            provider_metadata: { google: { thoughtSignature: 'TS' } },
          },
        ],
      }),
      chunk({}, { finish_reason: 'tool_calls' }),
    ]);
    const call = parts.find((p) => p.type === 'tool-call');
    expect(toolCallMetadataOf(call?.providerMetadata)).toEqual({ google: { thoughtSignature: 'TS' } });
    const finish = parts.find((p) => p.type === 'finish');
    expect(assistantMetadataOf(finish?.providerMetadata)).toEqual({
      reasoning_parts: [{ text: 'Think.', provider_metadata: { anthropic: { signature: 'SIG-1' } } }],
      content_provider_metadata: { google: { thoughtSignature: 'TS-text' } },
    });
  });

  it('history → streamText → the inner request keeps every signature, byte for byte', async () => {
    const history: PromptMessage[] = [
      { role: 'user', content: 'What is 6*7?' },
      SIGNED,
      { role: 'tool', tool_call_id: 'c1', name: 'calculator', content: '42' },
    ];
    let seen: LanguageModelV3CallOptions | undefined;
    const model = {
      specificationVersion: 'v3' as const,
      provider: 'test',
      modelId: 'test',
      supportedUrls: {},
      doGenerate: () => Promise.reject(new Error('not used')),
      doStream: async (options: LanguageModelV3CallOptions) => {
        seen = options;
        return {
          stream: new ReadableStream<LanguageModelV3StreamPart>({
            start(c) {
              c.enqueue({
                type: 'finish',
                finishReason: { unified: 'stop', raw: 'stop' },
                usage: {
                  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
                  outputTokens: { total: 1, text: 1, reasoning: undefined },
                },
              });
              c.close();
            },
          }),
        };
      },
    };
    const result = streamText({ model, messages: toModelMessages(history), maxRetries: 0 });
    await result.consumeStream();
    expect(fromV3Prompt(seen!.prompt)).toEqual(history);
  });
});
