/**
 * Conversion between the two message shapes the backend handles: the inner-LLM `PromptMessage`
 * (what history stores and what the api's invoke endpoint takes) and the AI SDK shapes: `ModelMessage`
 * (what the agent loop hands to `streamText`) and `LanguageModelV3Prompt` (what the model receives).
 * Both directions are lossless for what we produce, provider metadata included: an assistant message's reasoning
 * blocks, text and tool calls carry theirs as `providerOptions` through `streamText` and back
 * (docs/models.md "Provider metadata that must round-trip").
 */
import type { LanguageModelV3Prompt, LanguageModelV3TextPart } from '@ai-sdk/provider';
import type { AssistantContent, FilePart, ModelMessage, TextPart } from 'ai';
import type { PromptMessage, ProviderMetadata, ReasoningPart, ToolCall } from '../../core/protocol/inner-llm.js';

export function parseToolArgs(args: string): unknown {
  if (args.trim() === '') return {};
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

const stringifyArgs = (input: unknown): string => (typeof input === 'string' ? input : JSON.stringify(input ?? {}));

/**
 * History → AI SDK `ModelMessage[]` (what `streamText` takes). `streamText` turns these into the
 * `LanguageModelV3Prompt` the model receives; `fromV3Prompt` maps that back to the inner-LLM shape.
 * Files are `file` parts with an explicit media type (no sniffing), URLs are never downloaded (the
 * loop passes a no-op download function), so the round trip is lossless for what we produce.
 */
export function toModelMessages(messages: PromptMessage[]): ModelMessage[] {
  return messages.map((m): ModelMessage => {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: m.content };
      case 'user': {
        if (typeof m.content === 'string') return { role: 'user', content: [{ type: 'text', text: m.content }] };
        const parts: Array<TextPart | FilePart> = m.content.map((c) => {
          if (c.type === 'text') return { type: 'text', text: c.data };
          const mediaType = c.mime_type ?? 'image/*';
          if (c.base64_data) return { type: 'file', mediaType, data: c.base64_data };
          return { type: 'file', mediaType, data: new URL(c.url ?? 'about:blank') };
        });
        return { role: 'user', content: parts };
      }
      case 'assistant': {
        const content: Exclude<AssistantContent, string> = [];
        if (m.reasoning_parts?.length) {
          for (const r of m.reasoning_parts)
            content.push({ type: 'reasoning', text: r.text, ...(r.provider_metadata ? { providerOptions: r.provider_metadata } : {}) });
        } else if (m.reasoning_content) content.push({ type: 'reasoning', text: m.reasoning_content });
        if (m.content)
          content.push({
            type: 'text',
            text: m.content,
            ...(m.content_provider_metadata ? { providerOptions: m.content_provider_metadata } : {}),
          });
        for (const call of m.tool_calls ?? []) {
          content.push({
            type: 'tool-call',
            toolCallId: call.id,
            toolName: call.function.name,
            input: parseToolArgs(call.function.arguments),
            ...(call.provider_metadata ? { providerOptions: call.provider_metadata } : {}),
          });
        }
        return { role: 'assistant', content };
      }
      case 'tool':
        return {
          role: 'tool',
          content: [
            { type: 'tool-result', toolCallId: m.tool_call_id, toolName: m.name ?? '', output: { type: 'text', value: m.content } },
          ],
        };
    }
  });
}

/** A prompt part's providerOptions as stored metadata (undefined when it has none). */
function metadataOf(options: unknown): ProviderMetadata | undefined {
  if (!options || typeof options !== 'object' || Object.keys(options).length === 0) return undefined;
  return options as ProviderMetadata;
}

export function fromV3Prompt(prompt: LanguageModelV3Prompt): PromptMessage[] {
  const out: PromptMessage[] = [];
  for (const m of prompt) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user': {
        const onlyText = m.content.every((p) => p.type === 'text');
        if (onlyText) {
          out.push({ role: 'user', content: m.content.map((p) => (p as LanguageModelV3TextPart).text).join('') });
          break;
        }
        out.push({
          role: 'user',
          content: m.content.map((p) => {
            if (p.type === 'text') return { type: 'text' as const, data: p.text };
            const mime = p.mediaType === 'image/*' ? undefined : p.mediaType;
            if (p.data instanceof URL) return { type: 'image' as const, url: p.data.toString(), ...(mime ? { mime_type: mime } : {}) };
            const base64 = typeof p.data === 'string' ? p.data : Buffer.from(p.data).toString('base64');
            return { type: 'image' as const, base64_data: base64, ...(mime ? { mime_type: mime } : {}) };
          }),
        });
        break;
      }
      case 'assistant': {
        let text = '';
        let reasoning = '';
        let textMeta: ProviderMetadata | undefined;
        const parts: ReasoningPart[] = [];
        const toolCalls: ToolCall[] = [];
        for (const p of m.content) {
          const meta = metadataOf(p.providerOptions);
          if (p.type === 'text') {
            text += p.text;
            if (meta) textMeta = { ...textMeta, ...meta };
          } else if (p.type === 'reasoning') {
            reasoning += p.text;
            parts.push(meta ? { text: p.text, provider_metadata: meta } : { text: p.text });
          } else if (p.type === 'tool-call') {
            toolCalls.push({
              id: p.toolCallId,
              type: 'function',
              function: { name: p.toolName, arguments: stringifyArgs(p.input) },
              ...(meta ? { provider_metadata: meta } : {}),
            });
          }
        }
        out.push({
          role: 'assistant',
          content: text,
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          // The blocks themselves only when one carries metadata: the text alone says the rest.
          ...(parts.some((r) => r.provider_metadata) ? { reasoning_parts: parts } : {}),
          ...(textMeta ? { content_provider_metadata: textMeta } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        });
        break;
      }
      case 'tool':
        for (const p of m.content) {
          if (p.type !== 'tool-result') continue;
          const o = p.output;
          const content =
            o.type === 'text' || o.type === 'error-text'
              ? o.value
              : o.type === 'json' || o.type === 'error-json'
                ? JSON.stringify(o.value)
                : JSON.stringify(o);
          out.push({ role: 'tool', tool_call_id: p.toolCallId, name: p.toolName, content });
        }
        break;
    }
  }
  return out;
}
