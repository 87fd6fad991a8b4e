/**
 * Issue 28 item 3: document parsing runs in a child process with limits (core/domain/knowledge/parse-sandbox.ts). Each limit
 * is hit for real and is 400 `document_unreadable`: too many pages, too much decoded text, the wall clock, and the
 * address space (a compression bomb: 5 MB of PDF that inflates to 1.2 GB; before, offline, a 510 KB one took 1.1 GB
 * of the api's own memory).
 */
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SANDBOX_LIMITS } from '../../core/domain/knowledge/indexer.js';
import { prepareInSandbox } from '../../core/domain/knowledge/parse-sandbox.js';
import { manyPagePdf } from '../support/tiny-pdf.js';

const pages = (n: number) => Array.from({ length: n }, (_, i) => [`Page ${i + 1}.`, `Item ${i} weighs ${i * 3} grams.`]);
const limits = { ...DEFAULT_SANDBOX_LIMITS, timeoutMs: 60_000 };

describe('parse sandbox', () => {
  it('reads a PDF in the child: chunks and token counts', async () => {
    const r = await prepareInSandbox('pdf', manyPagePdf(pages(30)), limits);
    expect(r.chunks.join(' ')).toContain('Item 29 weighs 87 grams.');
    expect(r.tokens).toHaveLength(r.chunks.length);
    expect(r.tokens.every((t) => t > 0)).toBe(true);
  }, 60_000);

  it('refuses more pages than the limit, and more text than the limit', async () => {
    await expect(prepareInSandbox('pdf', manyPagePdf(pages(30)), { ...limits, maxPages: 10 })).rejects.toMatchObject({
      status: 400,
      code: 'document_unreadable',
      message: expect.stringContaining('30 pages; at most 10'),
    });
    await expect(prepareInSandbox('pdf', manyPagePdf(pages(30)), { ...limits, maxTextBytes: 500 })).rejects.toMatchObject({
      code: 'document_unreadable',
      message: expect.stringContaining('more than 500 bytes of text'),
    });
    const html = Buffer.from(`<p>${'word '.repeat(100_000)}</p>`);
    await expect(prepareInSandbox('html', html, { ...limits, maxTextBytes: 10_000 })).rejects.toMatchObject({
      code: 'document_unreadable',
    });
  }, 60_000);

  it('kills a parse that takes longer than the wall-clock limit', async () => {
    const started = Date.now();
    await expect(prepareInSandbox('pdf', manyPagePdf(pages(200)), { ...limits, timeoutMs: 300 })).rejects.toMatchObject({
      code: 'document_unreadable',
      message: expect.stringContaining('took longer than'),
    });
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 30_000);

  it('stops a compression bomb at the address-space limit, not in this process', async () => {
    const bomb = zlib.deflateSync(Buffer.alloc(1200 * 1024 * 1024, 0x20), { level: 1 });
    expect(bomb.length).toBeLessThan(15 * 1024 * 1024);
    const rssBefore = process.memoryUsage().rss;
    await expect(prepareInSandbox('pdf', manyPagePdf([['x']], { bomb }), { ...limits, memoryMb: 2_048 })).rejects.toMatchObject({
      code: 'document_unreadable',
      message: expect.stringMatching(/memory limit|took longer/),
    });
    // This process did not inflate it (the 1.2 GB input buffer above is already freed or counted before).
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(300 * 1024 * 1024);
  }, 120_000);
});
