/**
 * core/domain/soul-validation.ts without a database: schema issues name the field and the value given, and a refusal of
 * the backend's registry lands on the soul field its layer comes from (issue 14 "fail fast").
 */
import { describe, expect, it } from 'vitest';
import { demoSoulConfig } from '../../core/domain/soul.js';
import { describeSoulIssues, issueFromBackendError, parseSoul, validateSoul } from '../../core/domain/soul-validation.js';
import type { Db } from '../../core/platform/db.js';

const base = () => structuredClone(demoSoulConfig()) as unknown as Record<string, Record<string, unknown>>;

describe('parseSoul', () => {
  it('a valid config parses with no issues', () => {
    const r = parseSoul(base());
    expect(r.issues).toEqual([]);
    expect(r.soul?.model.provider).toBe('demo');
  });

  it('names every bad field, with the value given for an enum or format miss', () => {
    const s = base();
    s.tools = { core: ['calculator', 'web_search'], plugin: [{ provider: 'Bad Provider', name: 'x' }] };
    s.knowledge = { enabled: true, dataset_ids: ['not-a-uuid'] };
    const r = parseSoul(s);
    expect(r.soul).toBeNull();
    const text = describeSoulIssues(r.issues);
    expect(text).toContain(
      'tools.core[1]: builtin tools are current_time, calculator, scratchpad_set, scratchpad_get, http_request, json_query, text, code (got "web_search")',
    );
    expect(text).toContain('tools.plugin[0].provider: provider names are lowercase');
    expect(text).toContain('knowledge.dataset_ids[0]:');
    expect(text).toContain('"not-a-uuid"');
  });

  it('stops at the schema: the database and backend checks need a parsed config', async () => {
    const db = new Proxy(
      {},
      {
        get: () => {
          throw new Error('no database access expected');
        },
      },
    ) as unknown as Db;
    const backend = { validateComposition: () => Promise.reject(new Error('no backend call expected')) };
    const s = base();
    s.tools = { core: ['nope'], plugin: [] };
    const issues = await validateSoul({ db, backend }, { tenantId: 't', soul: s });
    expect(issues.map((i) => i.path)).toEqual([['tools', 'core', 0]]);
  });
});

describe("issueFromBackendError: the backend's refusal on the soul field of its layer", () => {
  it.each([
    ["layer 'runtime': set SHELLCTL_AUTH_TOKEN", ['runtime'], 'set SHELLCTL_AUTH_TOKEN'],
    ["layer 'shell': set SHELLCTL_AUTH_TOKEN", ['shell'], 'set SHELLCTL_AUTH_TOKEN'],
    ["layer 'knowledge': module knowledge is not available", ['knowledge'], 'module knowledge is not available'],
    ["tool name 'calculator' is offered by both layer 'tools' and layer 'core_tools'", ['tools', 'plugin'], "tool name 'calculator'"],
    ["layer 'llm' config.model_settings.temperature: Too big", ['model'], "layer 'llm' config.model_settings.temperature: Too big"],
    ['the composition needs exactly one model layer (llm), found 0', [], 'the composition needs exactly one model layer'],
  ])('%s', (message, path, shown) => {
    const issue = issueFromBackendError({ code: 'module_unavailable', message });
    expect(issue.path).toEqual(path);
    expect(issue.message).toContain(shown);
    expect(issue.message).toContain('(agent backend: module_unavailable)');
  });
});
