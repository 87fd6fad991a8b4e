/** The deterministic demo model, called directly (no HTTP): triggers, history, tokens, delay, abort. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PromptMessage, ToolDefinition } from '../../core/protocol/inner-llm.js';
import type { ProviderEvent } from '../../core/domain/llm/provider.js';
import { InvokeError } from '../../core/domain/llm/errors.js';
import { countTokens, createDemoProvider, DEMO_TRIGGERS, planDemoReply, streamPieces } from '../../core/domain/llm/providers/demo.js';

const tool = (name: string, parameters: Record<string, unknown> = {}): ToolDefinition => ({ name, description: '', parameters });
const user = (content: string): PromptMessage => ({ role: 'user', content });

async function collect(events: AsyncIterable<ProviderEvent>): Promise<ProviderEvent[]> {
  const out: ProviderEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

function invoke(
  messages: PromptMessage[],
  opts: { delay?: number; tools?: ToolDefinition[]; signal?: AbortSignal; params?: Record<string, unknown> } = {},
) {
  return createDemoProvider({ tokenDelayMs: opts.delay ?? 0 }).invoke({
    model: 'demo-chat',
    prompt_messages: messages,
    tools: opts.tools ?? [],
    model_parameters: opts.params ?? {},
    credentials: null,
    signal: opts.signal ?? new AbortController().signal,
  });
}

const text = (events: ProviderEvent[]) => events.map((e) => (e.type === 'delta' ? (e.content ?? '') : '')).join('');

describe('demo model', () => {
  it('/echo answers its text verbatim, newlines and markup kept (/echo-history is its own trigger)', async () => {
    const md = '# Title\n\n- one\n- two\n\n<img src=x onerror=alert(1)>';
    expect(planDemoReply([user(`/echo ${md}`)], []).text).toBe(md);
    expect(planDemoReply([user(`/echo\n${md}`)], []).text).toBe(md);
    expect(planDemoReply([user('/echo-history')], []).text).toContain('Your messages so far');
    expect(text(await collect(invoke([user(`/echo ${md}`)])))).toBe(md);
  });

  it('mentions the latest message and how many earlier user turns it remembers', () => {
    expect(planDemoReply([user('first'), { role: 'assistant', content: 'ok' }, user('second')], []).text).toBe(
      'You said: "second". (I remember 1 earlier message: "first")',
    );
  });

  it('is deterministic: the same conversation gives the same events', async () => {
    const msgs = [user('one'), user('/think what is 2+2?')];
    expect(await collect(invoke(msgs))).toEqual(await collect(invoke(msgs)));
  });

  it('calls a tool named by /tool with the JSON arguments, only when that tool is offered', () => {
    expect(planDemoReply([user('/tool search {"q":"cats"}')], [tool('search')]).tool_call).toEqual({ name: 'search', args: { q: 'cats' } });
    const missing = planDemoReply([user('/tool search {"q":"cats"}')], [tool('calculator')]);
    expect(missing.tool_call).toBeUndefined();
    expect(missing.text).toContain('not among my tools (calculator)');
    expect(planDemoReply([user('/tool search {oops')], [tool('search')]).text).toContain('is not JSON');
  });

  it('/calc uses the calculator’s own parameter name; /time calls current_time', () => {
    const calc = tool('calculator', { type: 'object', properties: { expr: { type: 'string' } } });
    expect(planDemoReply([user('/calc 1 + 2')], [calc]).tool_call).toEqual({ name: 'calculator', args: { expr: '1 + 2' } });
    expect(planDemoReply([user('/time')], [tool('current_time')]).tool_call).toEqual({ name: 'current_time', args: {} });
  });

  it('/ask builds the ask_human form of DEMO_MODEL.md', () => {
    expect(planDemoReply([user('/ask Proceed?')], [tool('ask_human')]).tool_call).toEqual({
      name: 'ask_human',
      args: {
        question: 'Proceed?',
        fields: [{ type: 'paragraph', name: 'answer', label: 'Answer', required: true }],
        actions: [{ id: 'submit', label: 'Submit', style: 'primary' }],
      },
    });
  });

  it('summarises ask_human timeouts and generic tool results', () => {
    const call = (id: string, name: string) => ({
      role: 'assistant' as const,
      content: '',
      tool_calls: [{ id, type: 'function' as const, function: { name, arguments: '{}' } }],
    });
    expect(
      planDemoReply([user('/ask x'), call('c1', 'ask_human'), { role: 'tool', tool_call_id: 'c1', content: '{"status":"timeout"}' }], [])
        .text,
    ).toContain('Nobody answered');
    expect(
      planDemoReply(
        [user('/time'), call('c2', 'current_time'), { role: 'tool', tool_call_id: 'c2', content: '{"result":"2026-01-01T00:00:00Z"}' }],
        [],
      ).text,
    ).toBe('The current time is 2026-01-01T00:00:00Z.');
    expect(planDemoReply([user('/tool x {}'), call('c3', 'x'), { role: 'tool', tool_call_id: 'c3', content: 'done' }], []).text).toBe(
      'The x tool returned: done.',
    );
  });

  it('/chain calls its tools one after another, "$prev.<field>" taking the previous observation, then answers the last', () => {
    const call = (id: string, name: string) => ({
      role: 'assistant' as const,
      content: '',
      tool_calls: [{ id, type: 'function' as const, function: { name, arguments: '{}' } }],
    });
    const tools = [tool('http_request'), tool('json_query')];
    const q = `/chain [{"tool": "http_request", "args": {"url": "http://x/"}}, {"tool": "json_query", "args": {"data": "$prev.body", "query": "a", "whole": "$prev"}}]`;
    expect(planDemoReply([user(q)], tools).tool_call).toEqual({ name: 'http_request', args: { url: 'http://x/' } });
    const fetched = '{"status":200,"body":"{\\"a\\":[1,2]}"}';
    const afterFirst: PromptMessage[] = [user(q), call('c1', 'http_request'), { role: 'tool', tool_call_id: 'c1', content: fetched }];
    expect(planDemoReply(afterFirst, tools).tool_call).toEqual({
      name: 'json_query',
      args: { data: '{"a":[1,2]}', query: 'a', whole: fetched },
    });
    const afterSecond: PromptMessage[] = [
      ...afterFirst,
      call('c2', 'json_query'),
      { role: 'tool', tool_call_id: 'c2', content: '{"result":"1,2"}' },
    ];
    expect(planDemoReply(afterSecond, tools)).toEqual({ text: 'The json_query tool returned: 1,2.' });
    // A step whose tool is not offered says so, as /tool does; steps that are not a list of {tool, args} are refused.
    expect(planDemoReply(afterFirst, [tool('http_request')]).text).toContain('I cannot call "json_query"');
    expect(planDemoReply([user('/chain {"tool": "x"}')], tools).text).toContain('must be a JSON array');
  });

  it('/long n answers with exactly n tokens', async () => {
    const events = await collect(invoke([user('/long 37')]));
    const finish = events[events.length - 1];
    expect(countTokens(text(events))).toBe(37);
    expect(finish).toMatchObject({ type: 'finish', finish_reason: 'stop', usage: { completion_tokens: 37 } });
  });

  it('stops at max_tokens with finish_reason length', async () => {
    const events = await collect(invoke([user('/long 50')], { params: { max_tokens: 10 } }));
    expect(events[events.length - 1]).toMatchObject({ finish_reason: 'length', usage: { completion_tokens: 10 } });
  });

  it('/fail throws the requested InvokeError kind after a few tokens', async () => {
    const seen: ProviderEvent[] = [];
    const err = await (async () => {
      try {
        for await (const e of invoke([user('/fail InvokeRateLimitError')])) seen.push(e);
      } catch (e) {
        return e;
      }
    })();
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(err).toBeInstanceOf(InvokeError);
    expect((err as InvokeError).errorType).toBe('InvokeRateLimitError');
  });

  it('waits the per-token delay (and /slow overrides it), and stops when aborted', async () => {
    const started = Date.now();
    await collect(invoke([user('/long 5')], { delay: 20 }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);

    const slowStart = Date.now();
    await collect(invoke([user('/slow 30 /long 4')], { delay: 0 }));
    expect(Date.now() - slowStart).toBeGreaterThanOrEqual(110);

    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('gone')), 50);
    await expect(collect(invoke([user('/long 1000')], { delay: 10, signal: abort.signal }))).rejects.toThrow('gone');
  });

  it('splits output into pieces that concatenate back to the text', () => {
    fc.assert(fc.property(fc.string(), (s) => streamPieces(s).join('') === s));
  });

  it('documents every trigger in DEMO_MODEL.md', async () => {
    const fs = await import('node:fs/promises');
    const doc = await fs.readFile(new URL('../../core/domain/llm/DEMO_MODEL.md', import.meta.url), 'utf8');
    for (const t of DEMO_TRIGGERS) expect(doc).toContain(t.trigger.split(' ')[0]);
  });
});
