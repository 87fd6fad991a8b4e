/**
 * docs/PROTOCOL.md's console table names every route the inspector reads (`agent/messages/{message_id}/…` in the
 * OpenAPI document): a reader of the contract finds the model-inputs route beside the run route it sits under. And
 * every console route of the OpenAPI document has a line of its own there: a table row whose first cell, or a
 * paragraph that begins with it, names it as `METHOD path` (relative to `/console/api/apps/{app_id}/` or
 * `/console/api/`, or whole; a query string after it is allowed) with the OpenAPI document's own parameter names. A
 * mention in passing elsewhere does not count: it says nothing of the route's answer.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../api/openapi/index.js';

const PREFIX = '/console/api/apps/{app_id}/';
const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

/** The routes PROTOCOL gives a line: `METHOD path` in a table row's first cell or at the start of a paragraph line. */
function namedRoutes(protocol: string): Set<string> {
  const named = new Set<string>();
  for (const line of protocol.split('\n')) {
    const head = line.startsWith('|') ? (line.split(/(?<!\\)\|/)[1] ?? '') : (/^`[A-Z]+ [^`]+`(?:, `[A-Z]+ [^`]+`)*/.exec(line)?.[0] ?? '');
    for (const m of head.matchAll(/`(GET|PUT|POST|PATCH|DELETE) ([^`\s?]+)[^`]*`/g)) {
      const path = m[2]!;
      for (const whole of [path, `/console/api/${path}`, `${PREFIX}${path}`]) named.add(`${m[1]} ${whole}`);
    }
  }
  return named;
}

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

  it('gives every console route of the OpenAPI document a line of its own', () => {
    const doc = JSON.parse(JSON.stringify(openApiDocument())) as { paths: Record<string, Record<string, unknown>> };
    const named = namedRoutes(readFileSync(new URL('../../docs/PROTOCOL.md', import.meta.url), 'utf8'));
    const routes = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/console/api/'))
      .flatMap(([path, item]) =>
        Object.keys(item)
          .filter((m) => METHODS.includes(m))
          .map((m) => `${m.toUpperCase()} ${path}`),
      );
    expect(routes.length).toBeGreaterThan(70);
    expect(routes.filter((r) => !named.has(r))).toEqual([]);
  });
});
