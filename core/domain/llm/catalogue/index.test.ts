import { describe, expect, it } from 'vitest';
import { BUILTIN_CATALOGUE, loadCatalogue, parseCatalogueOverrides } from './index.js';

describe('model catalogue', () => {
  it('knows each provider’s models with features, bounds and prices', () => {
    const m = BUILTIN_CATALOGUE.find('anthropic', 'claude-3-5-haiku-20241022')!;
    expect(m).toMatchObject({
      provider: 'anthropic',
      tool_calls: true,
      custom: false,
      prices: { input: '0.8', output: '4', cached_input: '0.08' },
    });
    expect(m.context_window).toBeGreaterThan(100_000);
    for (const p of ['openai', 'anthropic', 'google', 'azure', 'bedrock', 'ollama', 'demo'])
      expect(BUILTIN_CATALOGUE.list(p).length).toBeGreaterThan(0);
    expect(BUILTIN_CATALOGUE.find('demo', 'demo-text')).toMatchObject({ vision: false, prices: { input: '1', output: '2' } });
  });

  it('closed providers serve only catalogue models; open ones any name with their defaults', () => {
    expect(BUILTIN_CATALOGUE.resolve('openai', 'gpt-9-imaginary')).toBeUndefined();
    expect(BUILTIN_CATALOGUE.resolve('openai_compatible', 'my-model')).toMatchObject({
      custom: true,
      vision: false,
      tool_calls: true,
      prices: { input: '0.5' },
    });
    expect(BUILTIN_CATALOGUE.resolve('ollama', 'phi4')).toMatchObject({ custom: true, vision: false, prices: { input: '0' } });
  });

  it('takes per-deployment overrides: corrections, custom models like another, custom models in full', () => {
    const c = loadCatalogue(
      JSON.stringify([
        { provider: 'openai', model: 'gpt-4o', prices: { input: '2', output: '8', currency: 'USD' } },
        { provider: 'azure', model: 'prod-4o', like: 'gpt-4o' },
        { provider: 'openai_compatible', model: 'llava-next', vision: true, context_window: 8192 },
      ]),
    );
    expect(c.find('openai', 'gpt-4o')).toMatchObject({ prices: { input: '2', output: '8' }, vision: true, custom: false });
    expect(c.find('azure', 'prod-4o')).toMatchObject({
      vision: true,
      context_window: BUILTIN_CATALOGUE.find('azure', 'gpt-4o')!.context_window,
      label: 'prod-4o',
    });
    expect(c.find('openai_compatible', 'llava-next')).toMatchObject({ vision: true, context_window: 8192, tool_calls: true, custom: true });
    expect(() => loadCatalogue('[{"provider":"azure","model":"x","like":"nope"}]')).toThrow(/like 'nope'/);
    expect(() => loadCatalogue('[{"provider":"openai","model":"new-model"}]')).toThrow(/context_window/);
    expect(() => parseCatalogueOverrides('not json')).toThrow(/MODEL_CATALOGUE_OVERRIDES/);
    expect(() => parseCatalogueOverrides('[{"provider":"openai","model":"m","prices":{"input":"1e-3","output":"1"}}]')).toThrow(/decimal/);
  });
});
