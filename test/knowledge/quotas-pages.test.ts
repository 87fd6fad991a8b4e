/**
 * Issue 28 item 6: per-tenant quotas on datasets, documents and stored document bytes (TENANT_MAX_*; 403/413 with a
 * code, nothing written), and every list route paginated in Dify's shape `{data, has_more, limit, total, page}`
 * (default page 1, limit 20, at most 100): datasets, documents, tool providers, the studio's apps and annotations.
 * Before, a tenant could create datasets without end and `GET …/documents` returned all of them at once (150).
 * Also: a document refused within the upload's wait is that refusal (400), and no document row stays behind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { api } from '../api/helpers.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let consoleKey: string;

const consoleApi = (method: string, path: string, body?: unknown) =>
  api(stack.apiUrl, consoleKey, method, `/console/api${path}`, { body, timeoutMs: 30_000 });

interface Page<T = { id: string }> {
  data: T[];
  has_more: boolean;
  limit: number;
  total: number;
  page: number;
}

beforeAll(async () => {
  stack = await startTestStack('knowledge_quotas', {
    env: { TENANT_MAX_DATASETS: 3, TENANT_MAX_DOCUMENTS: 25, TENANT_MAX_DOCUMENT_BYTES: 200_000, KNOWLEDGE_INDEX_WAIT_MS: 20_000 },
  });
  consoleKey = stack.demo!.consoleKey;
});
afterAll(async () => stack?.stop());

describe('quotas', () => {
  let datasetId: string;

  it('datasets: the 4th of a tenant allowed 3 is 403 dataset_quota_exceeded', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await consoleApi('POST', '/datasets', { name: `ds ${i}` });
      expect(r.status).toBe(201);
      datasetId ??= (r.body as { id: string }).id;
    }
    const over = await consoleApi('POST', '/datasets', { name: 'one too many' });
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ code: 'dataset_quota_exceeded', status: 403 });
    expect(await stack.db.dataset.count({ where: { tenant_id: stack.demo!.tenantId } })).toBe(3);
  });

  it('documents: paged 20 at a time in Dify’s shape; the 26th of a tenant allowed 25 is 403 document_quota_exceeded', async () => {
    for (let i = 0; i < 25; i++) {
      const r = await consoleApi('POST', `/datasets/${datasetId}/documents`, { name: `note-${i}.txt`, text: `Note number ${i}.` });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    const over = await consoleApi('POST', `/datasets/${datasetId}/documents`, { name: 'note-25.txt', text: 'One too many.' });
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ code: 'document_quota_exceeded', status: 403 });

    const first = (await consoleApi('GET', `/datasets/${datasetId}/documents`)).body as Page;
    expect(first).toMatchObject({ limit: 20, page: 1, total: 25, has_more: true });
    expect(first.data).toHaveLength(20);
    const second = (await consoleApi('GET', `/datasets/${datasetId}/documents?page=2`)).body as Page;
    expect(second).toMatchObject({ limit: 20, page: 2, total: 25, has_more: false });
    expect(second.data).toHaveLength(5);
    // Pages do not overlap and cover everything.
    expect(new Set([...first.data, ...second.data].map((d) => d.id)).size).toBe(25);
    const small = (await consoleApi('GET', `/datasets/${datasetId}/documents?limit=10&page=3`)).body as Page;
    expect(small).toMatchObject({ limit: 10, page: 3, total: 25, has_more: false });
    expect(small.data).toHaveLength(5);
    for (const bad of ['limit=101', 'limit=0', 'page=0', 'page=abc']) {
      const r = await consoleApi('GET', `/datasets/${datasetId}/documents?${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body, bad).toMatchObject({ code: 'invalid_param' });
      expect((r.body as { message: string }).message, bad).toMatch(/^(limit|page):/);
    }
  });

  it('stored bytes: a document past the tenant’s bytes is 413 storage_quota_exceeded, nothing written', async () => {
    await stack.db.datasetDocument.deleteMany({ where: { dataset_id: datasetId } }); // room in the document count
    const before = await stack.db.datasetDocument.count();
    const r = await consoleApi('POST', `/datasets/${datasetId}/documents`, { name: 'big.txt', text: 'x '.repeat(110_000) });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: 'storage_quota_exceeded', status: 413 });
    expect(await stack.db.datasetDocument.count()).toBe(before);
  });

  it('a document refused within the wait is the refusal (400 document_unreadable), and no row stays', async () => {
    const form = new FormData();
    form.append('file', new Blob(['%PDF-1.4 not really a pdf'], { type: 'application/pdf' }), 'broken.pdf');
    const r = await consoleApi('POST', `/datasets/${datasetId}/documents`, form);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toMatchObject({ code: 'document_unreadable', status: 400 });
    expect(await stack.db.datasetDocument.count({ where: { dataset_id: datasetId, name: 'broken.pdf' } })).toBe(0);
  }, 60_000);
});

describe('pagination of the other lists', () => {
  it('datasets', async () => {
    const p = (await consoleApi('GET', '/datasets?limit=2')).body as Page;
    expect(p).toMatchObject({ limit: 2, page: 1, total: 3, has_more: true });
    expect(p.data).toHaveLength(2);
    const all = (await consoleApi('GET', '/datasets')).body as Page;
    expect(all).toMatchObject({ limit: 20, page: 1, total: 3, has_more: false });
  });

  it('tool providers', async () => {
    for (let i = 0; i < 3; i++)
      await stack.db.toolProvider.create({
        data: {
          tenant_id: stack.demo!.tenantId,
          name: `paged_${i}`,
          kind: 'mcp',
          description: '',
          server_url: 'http://example.com/mcp',
          auth: { headers: [] },
          tools: [],
        },
      });
    const p = (await api(stack.apiUrl, consoleKey, 'GET', '/console/api/tool-providers?limit=2&page=2')).body as Page<{ name: string }>;
    expect(p).toMatchObject({ limit: 2, page: 2, total: 3, has_more: false });
    expect(p.data.map((t) => t.name)).toEqual(['paged_2']);
  });

  it('studio apps and annotations', async () => {
    const apps = (await consoleApi('GET', '/apps')).body as Page;
    expect(apps).toMatchObject({ limit: 20, page: 1, has_more: false });
    expect(apps.total).toBeGreaterThanOrEqual(1);
    const appId = stack.demo!.appId;
    for (let i = 0; i < 3; i++)
      expect((await consoleApi('POST', `/apps/${appId}/annotations`, { question: `q${i}`, content: `a${i}` })).status).toBeLessThan(300);
    const ann = (await consoleApi('GET', `/apps/${appId}/annotations?limit=2`)).body as Page;
    expect(ann).toMatchObject({ limit: 2, page: 1, total: 3, has_more: true });
  });
});
