/**
 * Issue 28 item 3 over the real stack: indexing is a job off the upload request and off the event loop. A 2,000-page
 * PDF (built here) is accepted at once (202, `indexing_status` waiting/parsing/indexing), `/healthz` keeps answering
 * within 200 ms while it indexes (polled; before, the parse ran on the event loop inside the upload request: a 300 KB
 * PDF stalled /healthz 1.55 s), and it ends `completed` with its chunks searchable. A document over a parser limit
 * ends `error` `document_unreadable` with no chunk written; Dify's indexing-status route reports each step.
 * KNOWLEDGE_INDEX_WAIT_MS is 0 here: every upload answers without waiting for its job.
 */
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { api } from '../api/helpers.js';
import { startTestStack } from '../support/stack.js';
import { manyPagePdf } from '../support/tiny-pdf.js';

let stack: Stack;
let consoleKey: string;
let datasetId: string;

const consoleApi = (method: string, path: string, body?: unknown) =>
  api(stack.apiUrl, consoleKey, method, `/console/api${path}`, { body, timeoutMs: 30_000 });

function pdfForm(bytes: Buffer, name: string): FormData {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type: 'application/pdf' }), name);
  return form;
}

interface IndexingStatus {
  id: string;
  indexing_status: string;
  error: string | null;
  error_code: string | null;
  completed_segments: number;
  total_segments: number;
  processing_started_at: number | null;
  completed_at: number | null;
}

const status = async (id: string) =>
  ((await consoleApi('GET', `/datasets/${datasetId}/documents/${id}/indexing-status`)).body as { data: IndexingStatus[] }).data[0]!;

beforeAll(async () => {
  stack = await startTestStack('knowledge_jobs', { env: { KNOWLEDGE_INDEX_WAIT_MS: 0, KNOWLEDGE_PARSE_MAX_PAGES: 2_500 } });
  consoleKey = stack.demo!.consoleKey;
  const ds = await consoleApi('POST', '/datasets', { name: 'Big manuals' });
  expect(ds.status).toBe(201);
  datasetId = (ds.body as { id: string }).id;
});
afterAll(async () => stack?.stop());

describe('indexing jobs', () => {
  it('a 2,000-page PDF: the upload answers 202 at once, /healthz stays under 200 ms while it indexes, it ends completed', async () => {
    const pages = Array.from({ length: 2_000 }, (_, i) => [`Manual page ${i + 1}.`, `Part ${i} is stored in bay ${(i * 7) % 97}.`]);
    const pdf = manyPagePdf(pages);
    const started = performance.now();
    const up = await consoleApi('POST', `/datasets/${datasetId}/documents`, pdfForm(pdf, 'manual.pdf'));
    const uploadMs = performance.now() - started;
    expect(up.status, JSON.stringify(up.body)).toBe(202);
    const doc = up.body as { id: string; batch: string; indexing_status: string; status: string };
    expect(doc.batch).toBe(doc.id);
    expect(['waiting', 'parsing', 'indexing']).toContain(doc.indexing_status);
    expect(uploadMs).toBeLessThan(5_000);

    // Poll /healthz while the job runs; note the slowest answer and the steps seen.
    const seen = new Set<string>();
    let slowest = 0;
    const times: number[] = [];
    let polls = 0;
    let last: IndexingStatus | null = null;
    const deadline = Date.now() + 240_000;
    while (Date.now() < deadline) {
      const t = performance.now();
      const h = await fetch(`${stack.apiUrl}/healthz`, { signal: AbortSignal.timeout(5_000) });
      const ms = performance.now() - t;
      expect(h.status).toBe(200);
      slowest = Math.max(slowest, ms);
      times.push(ms);
      polls++;
      if (polls % 5 === 0) {
        last = await status(doc.id);
        seen.add(last.indexing_status);
        if (last.indexing_status === 'completed' || last.indexing_status === 'error') break;
      }
      await new Promise((r) => setTimeout(r, 40));
    }
    // The bound is on the 95th percentile, with every answer under 1 s: this box runs several test stacks on two cores,
    // so one poll may wait for the CPU; parsing on the event loop (the old way) held every poll for the whole parse.
    const p95 = [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.95)]!;
    console.log(
      `2,000-page PDF (${pdf.length} bytes): upload ${uploadMs.toFixed(0)} ms, ${polls} /healthz polls, p95 ${p95.toFixed(0)} ms, slowest ${slowest.toFixed(0)} ms, steps ${[...seen].join(' → ')}`,
    );
    expect(last?.indexing_status, JSON.stringify(last)).toBe('completed');
    expect(seen.has('parsing') || seen.has('indexing'), 'polled while it was indexing').toBe(true);
    expect(polls).toBeGreaterThan(10);
    expect(p95).toBeLessThan(200);
    expect(slowest).toBeLessThan(1_000);
    expect(last!.completed_segments).toBe(last!.total_segments);
    expect(last!.total_segments).toBeGreaterThan(50);
    expect(await stack.db.documentSegment.count({ where: { document_id: doc.id } })).toBe(last!.total_segments);
    expect(await stack.db.datasetDocumentSource.count({ where: { document_id: doc.id } })).toBe(0);

    const hit = await consoleApi('POST', `/datasets/${datasetId}/retrieve`, { query: 'Part 1500 stored in bay' });
    expect(JSON.stringify(hit.body)).toContain('Part 1500 is stored in bay');
    const one = await consoleApi('GET', `/datasets/${datasetId}/documents/${doc.id}`);
    expect(one.body).toMatchObject({ indexing_status: 'completed', status: 'completed', chunk_count: last!.total_segments });
  }, 300_000);

  it('a PDF over the page limit ends error document_unreadable with no chunk, and can be deleted', async () => {
    const pdf = manyPagePdf(Array.from({ length: 2_501 }, (_, i) => [`p${i}`]));
    const up = await consoleApi('POST', `/datasets/${datasetId}/documents`, pdfForm(pdf, 'too-long.pdf'));
    expect(up.status).toBe(202);
    const id = (up.body as { id: string }).id;
    let s = await status(id);
    for (let i = 0; i < 300 && s.indexing_status !== 'error' && s.indexing_status !== 'completed'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      s = await status(id);
    }
    expect(s).toMatchObject({ indexing_status: 'error', error_code: 'document_unreadable', completed_segments: 0 });
    expect(s.error).toContain('2501 pages; at most 2500');
    expect(await stack.db.documentSegment.count({ where: { document_id: id } })).toBe(0);
    expect(await stack.db.datasetDocumentSource.count({ where: { document_id: id } })).toBe(0);
    expect((await consoleApi('DELETE', `/datasets/${datasetId}/documents/${id}`)).status).toBe(204);
  }, 120_000);

  it('a job whose indexer died is claimed again once its lease lapses (the sweep)', async () => {
    const text = Buffer.from('The orphaned job still ends indexed.');
    // As if another api process had claimed it and died: parsing, under a lease that has already lapsed.
    const orphan = await stack.db.datasetDocument.create({
      data: {
        tenant_id: stack.demo!.tenantId,
        dataset_id: datasetId,
        name: 'orphan.txt',
        mime_type: 'text/plain',
        size: text.length,
        sha256: 'f'.repeat(64),
        status: 'parsing',
        attempts: 1,
        lease_owner: crypto.randomUUID(),
        lease_until: new Date(Date.now() - 1000),
        source: { create: { bytes: text } },
      },
    });
    let s = await status(orphan.id);
    for (let i = 0; i < 100 && s.indexing_status !== 'completed'; i++) {
      await new Promise((r) => setTimeout(r, 200));
      s = await status(orphan.id);
    }
    expect(s.indexing_status).toBe('completed');
    expect(await stack.db.datasetDocument.findUniqueOrThrow({ where: { id: orphan.id } })).toMatchObject({ attempts: 2, chunk_count: 1 });
  }, 60_000);
});
