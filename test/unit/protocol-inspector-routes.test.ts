/**
 * docs/PROTOCOL.md's console table names every route the inspector reads (`agent/messages/{message_id}/…` in the
 * OpenAPI document): a reader of the contract finds the model-inputs route beside the run route it sits under.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../api/openapi/index.js';

const PREFIX = '/console/api/apps/{app_id}/';

describe('docs/PROTOCOL.md', () => {
  it("lists every console route of one message's inspector", () => {
    const doc = JSON.parse(JSON.stringify(openApiDocument())) as { paths: Record<string, Record<string, unknown>> };
    const protocol = readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8');
    const routes = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith(`${PREFIX}agent/messages/{message_id}/`))
      .flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path.slice(PREFIX.length)}`));
    expect(routes).toContain('GET agent/messages/{message_id}/model-inputs');
    expect(routes.filter((r) => !protocol.includes(`\`${r}\``))).toEqual([]);
  });
});
