/**
 * What the console's model list declares a model takes (api/console/model-providers.ts modelView, from
 * core/domain/llm/model-check.ts modelParameters): the studio's agent form shows a setting only when the chosen model
 * takes it, bounded as the save-time check bounds it. Read from the builtin catalogue.
 */
import { describe, expect, it } from 'vitest';
import { modelView } from '../../api/console/model-providers.js';
import { BUILTIN_CATALOGUE } from '../../core/domain/llm/catalogue/index.js';
import { settingIssues } from '../../core/domain/llm/model-check.js';
import { modelInfoOf } from '../../core/domain/llm/provider.js';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';

const info = (provider: string, model: string) => {
  const entry = BUILTIN_CATALOGUE.find(provider, model);
  if (!entry) throw new Error(`${provider}/${model} is not in the catalogue`);
  return modelInfoOf(entry);
};
const view = (provider: string, model: string) => modelView(provider, info(provider, model));

/** The issues of a save of `settings` on a catalogue model (no tools: the model's tool calls are not the point). */
const saveIssues = (provider: string, model: string, settings: Record<string, unknown>, atSave = true) => {
  const soul = AgentSoulConfig.parse({
    ...demoSoulConfig(),
    tools: { core: [], plugin: [] },
    ask_human: { enabled: false },
    model: { provider, model, model_settings: settings },
  });
  return settingIssues(provider, info(provider, model), soul, { atSave });
};

describe('the settings a catalogue model declares', () => {
  it('a chat model that does not reason: temperature, max tokens to its max output, no reasoning settings', () => {
    const m = view('demo', 'demo-chat');
    expect(m.features).toMatchObject({ reasoning: false, temperature: true });
    expect(m.parameters).toEqual({
      temperature: { min: 0, max: 2 },
      max_tokens: { min: 1, max: 4096 },
      top_p: { min: 0, max: 1 },
      stop_sequences: { max: 8 },
      thinking_budget: null,
      reasoning_effort: null,
    });
  });

  it('an OpenAI reasoning model that takes no temperature: a reasoning effort, no temperature, no thinking budget', () => {
    const m = view('openai', 'o3');
    expect(m.features).toMatchObject({ reasoning: true, temperature: false });
    expect(m.parameters.temperature).toBeNull();
    expect(m.parameters.reasoning_effort).toEqual(['minimal', 'low', 'medium', 'high']);
    expect(m.parameters.thinking_budget).toBeNull();
    expect(m.parameters.max_tokens).toEqual({ min: 1, max: 100_000 });
    // The AI SDK drops a top P with the temperature of such a model; the Responses API takes no stop sequences.
    expect(m.parameters.top_p).toBeNull();
    expect(m.parameters.stop_sequences).toBeNull();
  });

  it('stop sequences on every provider but OpenAI (its Responses API takes none)', () => {
    expect(view('openai', 'gpt-4o-mini').parameters).toMatchObject({ top_p: { min: 0, max: 1 }, stop_sequences: null });
    for (const [provider, model] of [
      ['anthropic', 'claude-3-5-haiku-20241022'],
      ['google', 'gemini-2.0-flash'],
      ['bedrock', 'anthropic.claude-3-5-haiku-20241022-v1:0'],
      ['ollama', 'llama3.2'],
    ] as const)
      expect(view(provider, model).parameters.stop_sequences, provider).toEqual({ max: 8 });
  });

  it('an Anthropic reasoning model: a thinking budget from 1024 to below its max output, temperature up to 1', () => {
    const m = view('anthropic', 'claude-sonnet-4-20250514');
    expect(m.parameters.thinking_budget).toEqual({ min: 1024, max: 63_999, excludes: ['temperature', 'top_p'] });
    expect(m.parameters.reasoning_effort).toBeNull();
    expect(m.parameters.temperature).toEqual({ min: 0, max: 1 });
  });

  it('a Gemini reasoning model: a thinking budget from 1', () => {
    expect(view('google', 'gemini-2.5-flash').parameters.thinking_budget).toEqual({ min: 1, max: 65_535, excludes: [] });
  });
});

describe('a save holds the reasoning settings to what the model declares', () => {
  it('a thinking budget on a reasoning model whose provider takes a reasoning effort (OpenAI o3): refused, naming the field', () => {
    expect(view('openai', 'o3').parameters.thinking_budget).toBeNull();
    expect(saveIssues('openai', 'o3', { thinking_budget: 2048 })).toEqual([
      {
        path: ['model', 'model_settings', 'thinking_budget'],
        message: 'openai/o3 takes no thinking budget: set its reasoning effort instead',
      },
    ]);
    expect(saveIssues('openai', 'o3', { reasoning_effort: 'high' })).toEqual([]);
    // A stored config checked before a turn keeps running (it did before; the provider drops the setting).
    expect(saveIssues('openai', 'o3', { thinking_budget: 2048 }, false)).toEqual([]);
  });

  it('a reasoning effort on a model that takes a thinking budget (Claude, Gemini): refused, naming the field', () => {
    for (const [provider, model] of [
      ['anthropic', 'claude-sonnet-4-20250514'],
      ['google', 'gemini-2.5-flash'],
    ] as const) {
      expect(view(provider, model).parameters.reasoning_effort).toBeNull();
      expect(saveIssues(provider, model, { reasoning_effort: 'low' })).toEqual([
        {
          path: ['model', 'model_settings', 'reasoning_effort'],
          message: `${provider}/${model} takes no reasoning effort: set its thinking budget instead`,
        },
      ]);
      expect(saveIssues(provider, model, { thinking_budget: 2048 })).toEqual([]);
    }
  });

  it('neither on an Ollama reasoning model (its request carries only `think`)', () => {
    const issues = saveIssues('ollama', 'deepseek-r1', { thinking_budget: 2048, reasoning_effort: 'medium' });
    expect(issues.map((i) => i.path.at(-1))).toEqual(['thinking_budget', 'reasoning_effort']);
    expect(issues[0]!.message).toBe('ollama/deepseek-r1 takes no thinking budget');
  });
});
