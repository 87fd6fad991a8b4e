/** Request builder pieces (docs/seeds/000): mentions, model-settings whitelist, layer order, topology check. */
import { describe, expect, it } from 'vitest';
import { assertSnapshotMatches } from '../../activities/prepare/build-request.js';
import { buildComposition } from '../../core/domain/soul-composition.js';
import { keywordHit } from '../../activities/prepare/input-guards.js';
import { verifyExecutionContext } from '../../core/protocol/exec-context.js';
import { expandPromptMentions } from '../../core/domain/mentions.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { demoSoulConfig, whitelistModelSettings } from '../../core/domain/soul.js';

const turn = {
  tenantId: 't',
  appId: 'a',
  agentId: 'g',
  conversationId: 'c',
  messageId: 'm',
  userId: 'u',
  userFrom: 'end-user' as const,
  invokeFrom: 'service-api' as const,
  configVersionId: 'v',
  query: 'hello',
  files: [],
  supportsVision: false,
  innerApiKey: 'secret',
};

describe('expandPromptMentions', () => {
  it('resolves slash-menu tokens and markers, falls back to label then id, and removes leftovers', () => {
    const resolve = (kind: string, id: string) => (kind === 'tool' && id === 'search' ? 'the Search tool' : undefined);
    expect(expandPromptMentions('Use {{#tool.search#}} and [§dataset:ds1:Handbook§] and [§file:f9§].', resolve)).toBe(
      'Use the Search tool and Handbook and f9.',
    );
    expect(expandPromptMentions('A {{#sys.query.the question#}} B')).toBe('A the question B');
    expect(expandPromptMentions('broken {{##}} and [§§] gone')).toBe('broken  and  gone');
  });
});

describe('buildComposition', () => {
  it('orders the Agent App layers as docs/PROTOCOL.md §2 and never carries credentials', () => {
    const soul = demoSoulConfig();
    soul.model.model_settings = { temperature: 0.3, api_key: 'sk-nope', max_tokens: 100, logit_bias: { 1: 2 } };
    const layers = buildComposition(soul, turn);
    expect(layers.map((l) => l.name)).toEqual([
      'agent_soul_prompt',
      'agent_app_user_prompt',
      'execution_context',
      'history',
      'llm',
      'core_tools',
      'ask_human',
      'output',
    ]);
    const llm = layers.find((l) => l.name === 'llm')!;
    expect(llm.config.model_settings).toEqual({ temperature: 0.3, max_tokens: 100 });
    expect(llm.deps).toEqual(['execution_context']);
    expect(JSON.stringify(layers)).not.toContain('sk-nope');
    const ctx = layers.find((l) => l.name === 'execution_context')!.config as ExecutionContextLayerConfig;
    expect(verifyExecutionContext(ctx, 'secret')).toBe(true);
    expect(verifyExecutionContext({ ...ctx, user_id: 'someone-else' }, 'secret')).toBe(false);
  });

  it('sends images natively only to vision models; other files are listed by name, type and link', () => {
    const files = [
      { type: 'image' as const, url: 'https://x/cat.png', name: 'cat.png' },
      { type: 'document' as const, url: 'https://x/a.pdf', name: 'a.pdf' },
    ];
    const vision = buildComposition(demoSoulConfig(), { ...turn, files, supportsVision: true }).find(
      (l) => l.name === 'agent_app_user_prompt',
    )!;
    expect((vision.config.files as { url: string }[]).map((f) => f.url)).toEqual(['https://x/cat.png']);
    expect(vision.config.text).toContain('- a.pdf (document): https://x/a.pdf');
    expect(vision.config.text).not.toContain('download them');
    const text = buildComposition(demoSoulConfig(), { ...turn, files, supportsVision: false }).find(
      (l) => l.name === 'agent_app_user_prompt',
    )!;
    expect(text.config.files).toEqual([]);
    expect(text.config.text).toContain('- cat.png (image): https://x/cat.png');
  });

  it('resolves prompt mentions against the composition (issue 31): offered tool names, dataset names, variable values', () => {
    const soul = demoSoulConfig();
    soul.prompt.system_prompt =
      'Use {{#tool.calculator.calc#}} and {{#tool.weather__forecast.forecast#}}, not {{#tool.web_search.Search#}}; ' +
      'read [§dataset:11111111-1111-4111-8111-111111111111:Old label§]; answer {{#sys.query#}} for {{#inputs.name#}}.';
    soul.tools.plugin = [{ provider: 'weather', name: 'forecast', description: '', parameters: { type: 'object', properties: {} } }];
    soul.knowledge = {
      enabled: true,
      dataset_ids: ['11111111-1111-4111-8111-111111111111'],
      top_k: 4,
      score_threshold: 0,
      search_tool: true,
    };
    const prompt = buildComposition(soul, {
      ...turn,
      datasetNames: new Map([['11111111-1111-4111-8111-111111111111', 'Handbook']]),
      inputs: { name: 'Ada' },
    }).find((l) => l.name === 'agent_soul_prompt')!;
    expect(prompt.config.system_prompt).toBe('Use calculator and weather__forecast, not Search; read Handbook; answer hello for Ada.');
  });

  it('accepts a snapshot with the same ordered layer names and refuses any other topology', () => {
    const layers = buildComposition(demoSoulConfig(), turn);
    const snap = (names: string[]) => ({
      schema_version: 1 as const,
      layers: names.map((name) => ({ name, lifecycle_state: 'suspended' as const, runtime_state: {} })),
    });
    expect(() => assertSnapshotMatches(layers, snap(layers.map((l) => l.name)))).not.toThrow();
    expect(() => assertSnapshotMatches(layers, null)).not.toThrow();
    expect(() => assertSnapshotMatches(layers, snap(layers.map((l) => l.name).reverse()))).toThrow(/configuration changed/);
    expect(() => assertSnapshotMatches(layers, snap(layers.slice(1).map((l) => l.name)))).toThrow(/configuration changed/);
  });
});

describe('whitelistModelSettings', () => {
  it('drops unknown and invalid settings', () => {
    expect(whitelistModelSettings({ top_p: 0.5, stop_sequences: ['x'], seed: 7 })).toEqual({ top_p: 0.5, stop_sequences: ['x'] });
    expect(whitelistModelSettings({ temperature: 'hot' })).toEqual({});
  });
});

describe('keywordHit', () => {
  it('matches case-insensitively across texts and ignores blank keywords', () => {
    expect(keywordHit(['Bad'], ['all good', 'very BAD'])).toBe('Bad');
    expect(keywordHit(['', '  '], ['anything'])).toBeNull();
  });
});
