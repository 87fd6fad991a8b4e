/**
 * Issue 42's knowledge segments over the console API on the real stack: a dataset's chunk settings (size, overlap,
 * its own separator) cut the documents indexed after them; a document's segments are listed in order with their text;
 * a disabled segment is never retrieved (the hit test runs the same retrieval as a turn, full text, trigrams and the
 * demo embeddings' vectors) and comes back when enabled; an edited segment is found by its new text, not its old,
 * with its token count recomputed. Another tenant's dataset reads as missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KNOWLEDGE_RESPONSES } from '../../api/openapi/knowledge.js';
import { ensureAccount, ensureTenant, issueConsoleKey } from '../../core/domain/provision.js';
import type { Stack } from '../../stack/start-stack.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let strangerKey: string;

beforeAll(async () => {
  stack = await startTestStack('knowledge_segments');
  const tenant = await ensureTenant(stack.db, 'Another tenant');
  const stranger = await ensureAccount(stack.db, { tenantId: tenant.id, email: 'stranger@example.com', name: 'Stranger' });
  strangerKey = await issueConsoleKey(stack.db, { tenantId: tenant.id, accountId: stranger.id });
}, 120_000);
afterAll(async () => stack?.stop());

const call = async (path: string, method = 'GET', body?: unknown, key = stack.demo!.consoleKey) => {
  const res = await fetch(`${stack.apiUrl}/console/api${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reads the JSON answers field by field
  return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, any> };
};

type Segment = { id: string; position: number; content: string; token_count: number; char_count: number; enabled: boolean };

const TEXT = [
  'The canteen opens at eight and closes at three.',
  'Parking permits are issued by the facilities desk.',
  'Project Zephyr launch code is 7-ALPHA-42.',
].join('\n---\n');

describe('knowledge segments', () => {
  let ds: string;
  let doc: string;
  const hits = async (query: string) =>
    ((await call(`/datasets/${ds}/retrieve`, 'POST', { query, top_k: 5, score_threshold: 0.2 })).body.chunks as { content: string }[]).map(
      (c) => c.content,
    );

  it('chunk settings cut the documents indexed after them, at the dataset separator', async () => {
    const created = await call('/datasets', 'POST', { name: 'Office', embedding: { provider: 'demo', model: 'demo-embedding' } });
    expect(created.status).toBe(201);
    ds = created.body.id;
    expect(created.body.chunk_settings).toEqual({ max_chars: 1000, overlap_chars: 150, separators: [] });
    const put = await call(`/datasets/${ds}/chunk-settings`, 'PUT', { max_chars: 200, overlap_chars: 0, separators: ['\n---\n'] });
    expect(put.status).toBe(200);
    expect(KNOWLEDGE_RESPONSES.DatasetResponse.safeParse(put.body).error).toBeUndefined();
    expect(put.body.chunk_settings).toEqual({ max_chars: 200, overlap_chars: 0, separators: ['\n---\n'] });
    expect((await call(`/datasets/${ds}/chunk-settings`, 'PUT', { max_chars: 200, overlap_chars: 150 })).status).toBe(400);
    expect((await call(`/datasets/${ds}/chunk-settings`, 'PUT', { max_chars: 50 })).status).toBe(400);

    const up = await call(`/datasets/${ds}/documents`, 'POST', { name: 'office.md', text: TEXT });
    expect(up.status).toBe(201);
    doc = up.body.id;
    expect(up.body.chunk_count).toBe(3);
    const list = await call(`/datasets/${ds}/documents/${doc}/segments`);
    expect(list.status).toBe(200);
    expect(KNOWLEDGE_RESPONSES.SegmentListResponse.safeParse(list.body).error).toBeUndefined();
    // The whole text (150 characters) fits one default chunk; the separator makes it three.
    expect((list.body.data as Segment[]).map((s) => [s.position, s.content, s.enabled])).toEqual([
      [0, 'The canteen opens at eight and closes at three.', true],
      [1, 'Parking permits are issued by the facilities desk.', true],
      [2, 'Project Zephyr launch code is 7-ALPHA-42.', true],
    ]);
  });

  it('a disabled segment is not retrieved; enabled again, it is', async () => {
    expect(await hits('When does the canteen close?')).toContain('The canteen opens at eight and closes at three.');
    const [canteen] = (await call(`/datasets/${ds}/documents/${doc}/segments`)).body.data as Segment[];
    const off = await call(`/datasets/${ds}/documents/${doc}/segments/${canteen!.id}`, 'PATCH', { enabled: false });
    expect(off.status).toBe(200);
    expect(KNOWLEDGE_RESPONSES.SegmentResponse.safeParse(off.body).error).toBeUndefined();
    expect(off.body.enabled).toBe(false);
    const after = await hits('When does the canteen close?');
    expect(after.join('\n')).not.toContain('canteen');
    // Not by a misspelling (trigrams) either, nor at threshold 0 (vectors alone).
    expect((await hits('cantene closes')).join('\n')).not.toContain('canteen');
    const all = (await call(`/datasets/${ds}/retrieve`, 'POST', { query: 'canteen', top_k: 20, score_threshold: 0 })).body.chunks as {
      content: string;
    }[];
    expect(all.map((c) => c.content).join('\n')).not.toContain('canteen');
    expect((await call(`/datasets/${ds}/documents/${doc}/segments/${canteen!.id}`, 'PATCH', { enabled: true })).status).toBe(200);
    expect(await hits('When does the canteen close?')).toContain('The canteen opens at eight and closes at three.');
  });

  it('an edited segment is found by its new text, not its old one', async () => {
    const segments = (await call(`/datasets/${ds}/documents/${doc}/segments`)).body.data as Segment[];
    const parking = segments[1]!;
    const text = 'Visitor badges are printed at the reception kiosk in the atrium.';
    const edited = await call(`/datasets/${ds}/documents/${doc}/segments/${parking.id}`, 'PATCH', { content: text });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({ id: parking.id, position: 1, content: text, char_count: text.length, enabled: true });
    expect(edited.body.token_count).not.toBe(parking.token_count);
    expect(await hits('Where are visitor badges printed?')).toContain(text);
    expect((await hits('Who issues parking permits?')).join('\n')).not.toContain('Parking permits');
    // Its vector is the new text's: the row's embedding changed.
    const [row] = await stack.db.$queryRaw<{ n: number }[]>`
      select cardinality(embedding) as n from document_segments where id = ${parking.id}::uuid`;
    expect(row!.n).toBeGreaterThan(0);
  });

  it('refuses an empty edit, an unknown segment and another tenant', async () => {
    const [first] = (await call(`/datasets/${ds}/documents/${doc}/segments`)).body.data as Segment[];
    const seg = `/datasets/${ds}/documents/${doc}/segments/${first!.id}`;
    expect((await call(seg, 'PATCH', {})).status).toBe(400);
    expect((await call(seg, 'PATCH', { content: '   ' })).status).toBe(400);
    const missing = await call(`/datasets/${ds}/documents/${doc}/segments/00000000-0000-4000-8000-000000000000`, 'PATCH', {
      enabled: false,
    });
    expect(missing).toMatchObject({ status: 404, body: { code: 'segment_not_found' } });
    expect((await call(seg, 'PATCH', { enabled: false }, strangerKey)).status).toBe(404);
    expect((await call(`/datasets/${ds}/documents/${doc}/segments`, 'GET', undefined, strangerKey)).status).toBe(404);
    expect((await call(`/datasets/${ds}/chunk-settings`, 'PUT', { max_chars: 300 }, strangerKey)).status).toBe(404);
  });
});
