/**
 * Request mapping: the inner LLM request (Dify prompt messages, tool definitions, whitelisted model settings)
 * as AI SDK LanguageModelV3 call options. Consecutive tool results become one `tool` message (what every
 * provider expects after an assistant turn with several calls); a tool result's name comes from the assistant
 * call it answers. Tool-call arguments travel as the JSON text the model produced (parsed when they are JSON).
 * An assistant message's provider metadata goes back as each part's `providerOptions` (its reasoning blocks with their
 * signatures or encrypted content, its text's and its tool calls' thought signatures), exactly as the provider sent
 * it (docs/models.md "Provider metadata that must round-trip"); each package reads its own key.
 */
import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3ToolResultPart,
} from '@ai-sdk/provider';
import type { PromptMessage, ToolDefinition } from '../../../protocol/inner-llm.js';

type UserPart = Extract<LanguageModelV3Message, { role: 'user' }>['content'][number];
type AssistantPart = Extract<LanguageModelV3Message, { role: 'assistant' }>['content'][number];

function parseArguments(text: string): unknown {
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function imagePart(p: { url?: string; base64_data?: string; mime_type?: string }): UserPart {
  const mediaType = p.mime_type ?? 'image/*';
  if (p.base64_data) return { type: 'file', data: p.base64_data, mediaType: p.mime_type ?? 'image/png' };
  if (p.url?.startsWith('data:')) {
    const m = /^data:([^;,]+)?(?:;base64)?,(.*)$/s.exec(p.url);
    if (m) return { type: 'file', data: m[2] ?? '', mediaType: m[1] ?? 'image/png' };
  }
  return { type: 'file', data: new URL(p.url ?? ''), mediaType };
}

export function toPrompt(messages: PromptMessage[]): LanguageModelV3Prompt {
  const names = new Map<string, string>();
  const out: LanguageModelV3Prompt = [];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user': {
        const content: UserPart[] =
          typeof m.content === 'string'
            ? [{ type: 'text', text: m.content }]
            : m.content.map((p) => (p.type === 'text' ? { type: 'text', text: p.data } : imagePart(p)));
        out.push({ role: 'user', content });
        break;
      }
      case 'assistant': {
        const content: AssistantPart[] = [];
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
        for (const c of m.tool_calls ?? []) {
          names.set(c.id, c.function.name);
          content.push({
            type: 'tool-call',
            toolCallId: c.id,
            toolName: c.function.name,
            input: parseArguments(c.function.arguments),
            ...(c.provider_metadata ? { providerOptions: c.provider_metadata } : {}),
          });
        }
        if (content.length === 0) content.push({ type: 'text', text: '' });
        out.push({ role: 'assistant', content });
        break;
      }
      case 'tool': {
        const part: LanguageModelV3ToolResultPart = {
          type: 'tool-result',
          toolCallId: m.tool_call_id,
          toolName: m.name ?? names.get(m.tool_call_id) ?? 'tool',
          output: { type: 'text', value: m.content },
        };
        const last = out.at(-1);
        if (last?.role === 'tool') last.content.push(part);
        else out.push({ role: 'tool', content: [part] });
        break;
      }
    }
  }
  return out;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** The call options of one invoke; only the whitelisted settings pass (agent backend's whitelist, OpenAI names). */
export function toCallOptions(req: {
  prompt_messages: PromptMessage[];
  tools: ToolDefinition[];
  model_parameters: Record<string, unknown>;
  signal: AbortSignal;
}): LanguageModelV3CallOptions {
  const p = req.model_parameters;
  const stop = p.stop_sequences ?? p.stop;
  const stopSequences = Array.isArray(stop)
    ? stop.filter((s): s is string => typeof s === 'string')
    : typeof stop === 'string'
      ? [stop]
      : [];
  const maxTokens = num(p.max_tokens);
  const options: LanguageModelV3CallOptions = {
    prompt: toPrompt(req.prompt_messages),
    abortSignal: req.signal,
    ...(num(p.temperature) !== undefined ? { temperature: num(p.temperature) } : {}),
    ...(num(p.top_p) !== undefined ? { topP: num(p.top_p) } : {}),
    ...(num(p.presence_penalty) !== undefined ? { presencePenalty: num(p.presence_penalty) } : {}),
    ...(num(p.frequency_penalty) !== undefined ? { frequencyPenalty: num(p.frequency_penalty) } : {}),
    ...(maxTokens !== undefined ? { maxOutputTokens: Math.trunc(maxTokens) } : {}),
    ...(num(p.seed) !== undefined ? { seed: Math.trunc(num(p.seed)!) } : {}),
    ...(stopSequences.length ? { stopSequences } : {}),
  };
  if (req.tools.length > 0) {
    options.tools = req.tools.map((t) => ({
      type: 'function' as const,
      name: t.name,
      description: t.description,
      inputSchema: t.parameters as never,
    }));
    options.toolChoice = { type: 'auto' };
  }
  return options;
}
