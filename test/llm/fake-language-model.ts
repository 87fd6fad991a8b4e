/**
 * A scripted AI SDK language model (LanguageModelV3) for the gateway's own code paths: each `doStream` plays the next
 * attempt's stream parts, and counts the calls. Used where the provider package's wire format is not the point (the
 * fake servers of test/llm/providers/fake-providers.ts are, for that).
 */
import { APICallError, type LanguageModelV3, type LanguageModelV3StreamPart, type SharedV3Warning } from '@ai-sdk/provider';
import { z } from 'zod';
import { BUILTIN_CATALOGUE } from '../../core/domain/llm/catalogue/index.js';
import { createAiSdkProvider } from '../../core/domain/llm/ai-sdk/adapter.js';
import type { LlmProvider } from '../../core/domain/llm/provider.js';

const usage = {
  inputTokens: { total: 5, noCache: 5, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 2, text: 2, reasoning: undefined },
};

/** An answer of `text` whose stream-start carries `warnings`, as the AI SDK's providers send it. */
export function answerParts(text: string, warnings: SharedV3Warning[] = []): LanguageModelV3StreamPart[] {
  return [
    { type: 'stream-start', warnings },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ];
}

/** An attempt the provider ends with a 503 after its stream-start (retried: nothing was streamed). */
export function overloadedParts(warnings: SharedV3Warning[] = []): LanguageModelV3StreamPart[] {
  const error = new APICallError({ message: 'overloaded', url: 'http://fake', requestBodyValues: {}, statusCode: 503, isRetryable: true });
  return [
    { type: 'stream-start', warnings },
    { type: 'error', error },
  ];
}

export function scriptedModel(attempts: LanguageModelV3StreamPart[][]): LanguageModelV3 & { calls: number } {
  const model = {
    specificationVersion: 'v3' as const,
    provider: 'fake',
    modelId: 'gpt-4o-mini',
    supportedUrls: {},
    calls: 0,
    doGenerate: () => Promise.reject(new Error('the gateway streams')),
    doStream: () => {
      const parts = attempts[Math.min(model.calls++, attempts.length - 1)]!;
      return Promise.resolve({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(c) {
            for (const p of parts) c.enqueue(p);
            c.close();
          },
        }),
      });
    },
  };
  return model;
}

/** The `openai` provider of the builtin catalogue over a scripted model, system-hosted, retrying at once. */
export function scriptedProvider(model: LanguageModelV3): LlmProvider {
  return createAiSdkProvider({
    name: 'openai',
    catalogue: BUILTIN_CATALOGUE,
    credentials: z.object({ api_key: z.string() }),
    system: { api_key: 'sk-fake-0123456789' },
    model: () => Promise.resolve(model),
    secrets: (c) => [c.api_key],
    retry: { baseDelayMs: 1 },
  });
}
