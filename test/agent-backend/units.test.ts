/**
 * Unit-level specifications of the backend's pure parts: the calculator, decimal price sums, the
 * inner-LLM model's request and stream mapping, request planning (aliases, frozen config) and
 * dangling deferred calls.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { closeDanglingToolCalls } from '../../agent-backend/agent-loop.js';
import { instantiate, planRun } from '../../agent-backend/composition.js';
import { addDecimal } from '../../agent-backend/decimal.js';
import { HttpError, ModelCallError } from '../../agent-backend/errors.js';
import { createInnerLlmCaller } from '../../agent-backend/model/inner-llm-model.js';
import { CalculatorError, evaluate } from '../../agent-backend/modules/calculator.js';
import { createRegistry } from '../../agent-backend/modules/registry.js';
import { Mutex, noPluginTools } from '../../agent-backend/modules/types.js';
import { createLogger } from '../../core/platform/logger.js';
import { runRequest } from './harness.js';

describe('calculator', () => {
  it('follows arithmetic precedence, right-associative powers and functions', () => {
    expect(evaluate('2 + 3 * 4')).toBe(14);
    expect(evaluate('(2 + 3) * 4')).toBe(20);
    expect(evaluate('2 ^ 3 ^ 2')).toBe(512);
    expect(evaluate('2 ** 3')).toBe(8);
    expect(evaluate('-2 ^ 2')).toBe(-4);
    expect(evaluate('10 % 4 + sqrt(16) + max(1, 7, 3) + abs(-2)')).toBe(15);
    expect(evaluate('1.5e2 / 3')).toBe(50);
    expect(evaluate('round(pi * 100)')).toBe(314);
  });

  it('rejects anything that is not arithmetic', () => {
    for (const bad of ['', '1 +', 'process.exit()', 'constructor', '1 / 0', '(1', 'foo(1)', '2 3', 'sqrt(1, 2)', "'a'"]) {
      expect(() => evaluate(bad), bad).toThrow(CalculatorError);
    }
  });

  it('agrees with integer arithmetic on random expressions', () => {
    // `peak` tracks the largest intermediate magnitude: doubles are exact only below 2^53, so expressions
    // whose intermediates exceed that are outside what a float calculator can promise.
    type Expr = { src: string; value: bigint; peak: bigint };
    const abs = (v: bigint) => (v < 0n ? -v : v);
    const leaf = fc.integer({ min: 0, max: 1000 }).map((n): Expr => ({ src: String(n), value: BigInt(n), peak: BigInt(n) }));
    const { expr } = fc.letrec<{ expr: Expr }>((tie) => ({
      expr: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.tuple(tie('expr'), fc.constantFrom('+', '-', '*'), tie('expr')).map(([a, op, b]): Expr => {
          const value = op === '+' ? a.value + b.value : op === '-' ? a.value - b.value : a.value * b.value;
          const peak = [a.peak, b.peak, abs(value)].reduce((m, v) => (v > m ? v : m));
          return { src: `(${a.src} ${op} ${b.src})`, value, peak };
        }),
      ),
    }));
    fc.assert(
      fc.property(expr, (e) => {
        fc.pre(e.peak < 2n ** 50n);
        // `+ 0` folds -0 (e.g. 0 * -1) into 0: the same number for a calculator.
        expect(evaluate(e.src) + 0).toBe(Number(e.value));
      }),
    );
  });
});

describe('decimal prices', () => {
  it('adds decimal strings exactly', () => {
    expect(addDecimal('0.1', '0.2')).toBe('0.3');
    expect(addDecimal('0.00001', '0.00002')).toBe('0.00003');
    expect(addDecimal('0', '1.50')).toBe('1.5');
    expect(addDecimal('12', '0.0000001')).toBe('12.0000001');
    expect(addDecimal('1e-7', '0')).toBe('0.0000001');
  });

  it('matches scaled integer addition', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), fc.bigInt({ min: 0n, max: 10n ** 15n }), (a, b) => {
        const dec = (v: bigint) => `${v / 10n ** 7n}.${(v % 10n ** 7n).toString().padStart(7, '0')}`;
        const norm = (s: string) => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
        expect(addDecimal(dec(a), dec(b))).toBe(norm(dec(a + b)));
      }),
    );
  });
});

describe('inner LLM model', () => {
  const target = {
    runId: 'run-1',
    provider: 'openai',
    model: 'gpt-x',
    caller: { tenant_id: 't', user_id: 'u', user_from: 'account' as const, app_id: 'a', invoke_from: 'debugger' },
  };
  const sse = (...chunks: unknown[]) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('');
  const chunk = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    code: 0,
    message: '',
    data: { model: 'gpt-x', delta: { index: 0, message: { content: '', ...message }, ...extra } },
  });
  async function parts(body: string, status = 200, capture?: (init: RequestInit) => void) {
    const model = createInnerLlmCaller({
      apiUrl: 'http://api.test/',
      innerApiKey: 'k',
      retry: { budgetMs: 0 },
      fetch: async (_url, init) => {
        capture?.(init!);
        return new Response(body, { status, headers: { 'content-type': status === 200 ? 'text/event-stream' : 'application/json' } });
      },
    })(target);
    const { stream } = await model.doStream({
      prompt: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      temperature: 0.5,
      maxOutputTokens: 100,
      topK: 3,
      providerOptions: { dify: { call_index: 4 } },
    });
    const out: LanguageModelV3StreamPart[] = [];
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      out.push(value);
    }
  }

  it('sends whitelisted settings, the run as invocation and the call index', async () => {
    let sent: Record<string, unknown> = {};
    await parts(sse(chunk({ content: 'x' })), 200, (init) => (sent = JSON.parse(String(init.body))));
    expect(sent).toEqual({
      caller: {
        invocation_id: 'run-1',
        agent_run_id: 'run-1',
        call_index: 4,
        tenant_id: 't',
        user_id: 'u',
        user_from: 'account',
        app_id: 'a',
        invoke_from: 'debugger',
        agent_mode: 'agent',
      },
      target: {
        provider: 'openai',
        model: 'gpt-x',
        prompt_messages: [{ role: 'user', content: 'hi' }],
        model_parameters: { temperature: 0.5, max_tokens: 100 },
        stream: true,
      },
    });
  });

  it('joins fragmented tool calls and reports usage with prices', async () => {
    const out = await parts(
      sse(
        chunk({ tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calculator', arguments: '{"expr' } }] }),
        chunk({ tool_calls: [{ id: '', type: 'function', function: { name: '', arguments: 'ession":"1"}' } }] }),
        chunk({}, { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, total_price: '0.1' }, finish_reason: 'tool_calls' }),
      ),
    );
    expect(out.find((p) => p.type === 'tool-call')).toMatchObject({
      toolCallId: 'c1',
      toolName: 'calculator',
      input: '{"expression":"1"}',
    });
    const finish = out.find((p) => p.type === 'finish');
    expect(finish).toMatchObject({
      finishReason: { unified: 'tool-calls' },
      providerMetadata: { dify: { usage: { total_price: '0.1' } } },
    });
  });

  it('turns error chunks and HTTP errors into provider errors with the error type', async () => {
    const out = await parts(
      sse(chunk({ content: 'a' }), { code: -1, message: 'bad', data: { error_type: 'InvokeServerUnavailableError', message: 'down' } }),
    );
    const err = out.find((p) => p.type === 'error');
    expect(err && err.type === 'error' && err.error).toBeInstanceOf(ModelCallError);
    expect((err as { error: ModelCallError }).error.errorType).toBe('InvokeServerUnavailableError');
    await expect(parts(JSON.stringify({ code: 'unauthorized', message: 'no' }), 401)).rejects.toMatchObject({
      errorType: 'InvokeAuthorizationError',
    });
    await expect(parts('oops', 503)).rejects.toMatchObject({ errorType: 'InvokeServerUnavailableError' });
  });
});

describe('inner LLM model after a transport failure', () => {
  const target = {
    runId: 'run-7',
    provider: 'demo',
    model: 'demo-chat',
    caller: { tenant_id: 't', user_id: 'u', user_from: 'account' as const, app_id: 'a', invoke_from: 'debugger' },
  };
  const frame = (c: unknown) => `data: ${JSON.stringify(c)}\n\n`;
  const chunk = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    frame({ code: 0, message: '', data: { model: 'demo-chat', delta: { index: 0, message: { content: '', ...message }, ...extra } } });
  const final = chunk(
    {},
    { usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, total_price: '0.1' }, finish_reason: 'stop' },
  );
  /** A response whose body delivers `frames` and then either ends or breaks (connection reset). */
  const answer = (frames: string[], end: 'ok' | 'break' = 'ok') =>
    new Response(
      new ReadableStream<Uint8Array>({
        pull(ctrl) {
          const f = frames.shift();
          if (f !== undefined) ctrl.enqueue(new TextEncoder().encode(f));
          else if (end === 'break') ctrl.error(new TypeError('terminated'));
          else ctrl.close();
        },
      }),
      { status: 200, headers: { 'content-type': 'text/event-stream' } },
    );
  type Script = Array<Response | Error>;
  async function run(script: Script, budgetMs = 5_000) {
    const bodies: Array<{ caller: { invocation_id: string; call_index: number } }> = [];
    const model = createInnerLlmCaller({
      apiUrl: 'http://api.test',
      innerApiKey: 'k',
      retry: { budgetMs, baseMs: 1, maxMs: 2 },
      fetch: async (_url, init) => {
        bodies.push(JSON.parse(String(init!.body)));
        const next = script.shift();
        if (!next) throw new Error('no more scripted answers');
        if (next instanceof Error) throw next;
        return next;
      },
    })(target);
    const { stream } = await model.doStream({
      prompt: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      providerOptions: { dify: { call_index: 2 } },
    });
    const out: LanguageModelV3StreamPart[] = [];
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { out, bodies };
      out.push(value);
    }
  }
  const text = (out: LanguageModelV3StreamPart[]) => out.map((p) => (p.type === 'text-delta' ? p.delta : '')).join('');
  const reasoning = (out: LanguageModelV3StreamPart[]) => out.map((p) => (p.type === 'reasoning-delta' ? p.delta : '')).join('');

  it('sends the same call again and emits only what lies beyond what was already streamed', async () => {
    const pieces = ['One ', 'two ', 'three ', 'four.'];
    const { out, bodies } = await run([
      new TypeError('fetch failed: ECONNREFUSED'),
      answer([chunk({ reasoning_content: 'hm' }), chunk({ content: pieces[0] }), chunk({ content: 'tw' })], 'break'),
      answer([chunk({ content: 'One two ' }), chunk({ content: 'thr' })]), // ended before its final chunk
      answer([chunk({ reasoning_content: 'hm' }), ...pieces.map((t) => chunk({ content: t })), final]),
    ]);
    expect(bodies).toHaveLength(4);
    expect(new Set(bodies.map((b) => `${b.caller.invocation_id}:${b.caller.call_index}`))).toEqual(new Set(['run-7:2']));
    expect(reasoning(out)).toBe('hm');
    expect(text(out)).toBe('One two three four.');
    expect(out.filter((p) => p.type === 'text-start')).toHaveLength(1);
    expect(out.filter((p) => p.type === 'finish')).toHaveLength(1);
    expect(out.find((p) => p.type === 'finish')).toMatchObject({ providerMetadata: { dify: { usage: { completion_tokens: 4 } } } });
    expect(out.some((p) => p.type === 'error')).toBe(false);
  });

  it('fails the call when the replay differs from what was already streamed', async () => {
    const { out } = await run([answer([chunk({ content: 'Hello ' })], 'break'), answer([chunk({ content: 'Goodbye ' }), final])]);
    expect(text(out)).toBe('Hello ');
    const err = out.find((p) => p.type === 'error');
    expect((err as { error: ModelCallError }).error).toMatchObject({ errorType: 'InvokeConnectionError' });
  });

  it('never retries an answer of the model: an error chunk, a 4xx', async () => {
    const errorChunk = frame({ code: -1, message: 'bad', data: { error_type: 'InvokeRateLimitError', message: 'slow down' } });
    const a = await run([answer([chunk({ content: 'a' }), errorChunk]), answer([final])]);
    expect(a.bodies).toHaveLength(1);
    expect((a.out.find((p) => p.type === 'error') as { error: ModelCallError }).error.errorType).toBe('InvokeRateLimitError');
    const b = run([new Response(JSON.stringify({ code: 'invalid_request', message: 'no' }), { status: 400 }), answer([final])]);
    await expect(b).rejects.toMatchObject({ errorType: 'InvokeBadRequestError' });
  });

  it('gives up once the retry budget is spent, as a connection error', async () => {
    const { out, bodies } = await run(
      [answer([chunk({ content: 'x' })], 'break'), ...Array.from({ length: 50 }, () => new TypeError('ECONNREFUSED'))],
      40,
    );
    expect(bodies.length).toBeGreaterThan(2);
    expect(bodies.length).toBeLessThan(50);
    expect((out.find((p) => p.type === 'error') as { error: ModelCallError }).error.errorType).toBe('InvokeConnectionError');
  });
});

describe('run planning', () => {
  const registry = createRegistry();
  const limits = { maxModelRequests: 5, maxToolCalls: 5, maxWallClockMs: 1000 };
  const services = {
    runId: 'r',
    logger: createLogger('t', 'silent'),
    toolResolver: noPluginTools,
    resources: { acquire: <T>(_k: string, v: T) => v, get: () => undefined },
  };

  it('gives aliases of one module independent config and state, and freezes config', () => {
    const req = runRequest({
      extraLayers: [
        { name: 'math_tools', type: 'core_tools', config: { tools: ['calculator'] } },
        { name: 'notes', type: 'core_tools', config: { tools: ['scratchpad_set'] } },
        { name: 'style', type: 'prompt', config: { text: 'Be terse.' } },
      ],
    });
    const plan = planRun(req, registry, limits);
    const [a, b] = instantiate(plan, services).filter((i) => i.type === 'core_tools');
    const [a2] = instantiate(plan, services).filter((i) => i.type === 'core_tools');
    expect([a.name, b.name]).toEqual(['math_tools', 'notes']);
    expect(a.state).not.toBe(b.state);
    expect(a.state).not.toBe(a2.state);
    const llm = plan.layers.find((l) => l.spec.type === 'llm')!;
    expect(Object.isFrozen(llm.config)).toBe(true);
    expect(Object.isFrozen((llm.config as { model_settings: object }).model_settings)).toBe(true);
  });

  it('rejects the same tool name from two layers, a second model and too-generous limits', () => {
    const dup = runRequest({
      coreTools: ['calculator'],
      extraLayers: [{ name: 'more', type: 'core_tools', config: { tools: ['calculator'] } }],
    });
    expect(() => planRun(dup, registry, limits)).toThrow(/tool name 'calculator' is offered by both/);
    const twoModels = runRequest({ extraLayers: [{ name: 'llm2', type: 'llm', config: { provider: 'p', model: 'm' } }] });
    expect(() => planRun(twoModels, registry, limits)).toThrow(/exactly one model layer/);
    const plan = planRun(runRequest({ metadata: { limits: { max_model_requests: 50, max_tool_calls: 2 } } }), registry, limits);
    expect(plan.limits).toEqual({ maxModelRequests: 5, maxToolCalls: 2, maxWallClockMs: 1000 });
    const err = (() => {
      try {
        planRun(runRequest({ deferred_tool_results: { calls: {} } }), registry, limits);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(HttpError);
  });
});

describe('deferred tool calls in history', () => {
  it('closes each open call with its result or unavailable, after existing results', () => {
    const { messages, closed } = closeDanglingToolCalls(
      [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'a', type: 'function', function: { name: 'ask_human', arguments: '{}' } },
            { id: 'b', type: 'function', function: { name: 'calculator', arguments: '{}' } },
            { id: 'c', type: 'function', function: { name: 'ask_human', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'b', content: '2' },
      ],
      { a: { status: 'timeout' } },
    );
    expect(messages.slice(2).map((m) => (m.role === 'tool' ? [m.tool_call_id, m.content] : m.role))).toEqual([
      ['b', '2'],
      ['a', '{"status":"timeout"}'],
      ['c', '{"status":"unavailable"}'],
    ]);
    expect(closed.map((c) => c.call.id)).toEqual(['a', 'c']);
  });
});

describe('mutex', () => {
  it('runs critical sections one at a time in order', async () => {
    const m = new Mutex();
    const log: string[] = [];
    await Promise.all(
      [3, 1, 2].map((ms, i) =>
        m.run(async () => {
          log.push(`start ${i}`);
          await new Promise((r) => setTimeout(r, ms));
          log.push(`end ${i}`);
        }),
      ),
    );
    expect(log).toEqual(['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2']);
  });
});
