/** Knowledge uploads: which documents we read and how (text, Markdown, HTML, PDF), and chunking with overlap. */
import { describe, expect, it } from 'vitest';
import { CHUNK_MAX_CHARS, CHUNK_OVERLAP_CHARS, chunkText } from '../../core/domain/knowledge/chunk.js';
import { formatKnowledgeBlock, parseKnowledgeBlock } from '../../core/protocol/context-block.js';
import { KnowledgeError } from '../../core/domain/knowledge/errors.js';
import { documentKind, extractDocumentText } from '../../core/domain/knowledge/parse.js';
import { tinyPdf } from '../support/tiny-pdf.js';

describe('document kinds', () => {
  it('come from the MIME type, else from the extension; others are refused', () => {
    expect(documentKind('a.bin', 'text/markdown; charset=utf-8')).toBe('markdown');
    expect(documentKind('notes.md', 'application/octet-stream')).toBe('markdown');
    expect(documentKind('page.HTM', null)).toBe('html');
    expect(documentKind('paper.pdf', '')).toBe('pdf');
    expect(documentKind('photo.png', 'image/png')).toBeNull();
  });
});

describe('text extraction', () => {
  it('reads UTF-8 text and Markdown as written', async () => {
    expect(await extractDocumentText('markdown', Buffer.from('# Title\n\nSome *text* — ü'))).toBe('# Title\n\nSome *text* — ü');
  });

  it('refuses binary and non-UTF-8 content as unreadable', async () => {
    await expect(extractDocumentText('text', Buffer.from([0x61, 0x00, 0x62]))).rejects.toMatchObject({ code: 'document_unreadable' });
    await expect(extractDocumentText('text', Buffer.from([0xff, 0xfe, 0xfd]))).rejects.toBeInstanceOf(KnowledgeError);
  });

  it('turns HTML into its visible text (no scripts, styles, link targets or images)', async () => {
    const html =
      '<html><head><style>p{color:red}</style><script>alert(1)</script></head>' +
      '<body><h2>Opening hours</h2><p>Open <a href="https://x.example/">daily</a> from 9 to 5.</p><img src="x.png" alt="logo"></body></html>';
    const text = await extractDocumentText('html', Buffer.from(html));
    expect(text).toContain('OPENING HOURS');
    expect(text).toContain('Open daily from 9 to 5.');
    expect(text).not.toMatch(/alert|color|x\.example|logo/);
  });

  it('extracts the text of a PDF offline', async () => {
    const text = await extractDocumentText(
      'pdf',
      tinyPdf(['The launch code of project Zephyr is 7-ALPHA-42.', 'Page text (with parentheses).']),
    );
    expect(text).toContain('The launch code of project Zephyr is 7-ALPHA-42.');
    expect(text).toContain('Page text (with parentheses).');
  });

  it('refuses a file that only claims to be a PDF', async () => {
    await expect(extractDocumentText('pdf', Buffer.from('not a pdf at all'))).rejects.toMatchObject({ code: 'document_unreadable' });
  });
});

describe('chunking', () => {
  const sentences = Array.from({ length: 80 }, (_, i) => `Sentence ${i} tells fact number ${i}.`).join(' ');

  it('keeps every chunk within the size and overlaps neighbours', () => {
    const chunks = chunkText(sentences, { maxChars: 300, overlapChars: 60 });
    expect(chunks.length).toBeGreaterThan(3);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(300);
    for (let i = 1; i < chunks.length; i++) {
      // The start of each chunk repeats the end of the one before it.
      const head = chunks[i]!.slice(0, 20);
      expect(chunks[i - 1]).toContain(head);
    }
    // Nothing is lost: every sentence is whole in some chunk.
    for (let i = 0; i < 80; i++) expect(chunks.some((c) => c.includes(`Sentence ${i} tells fact number ${i}.`))).toBe(true);
  });

  it('cuts at paragraph breaks when there is one, and tidies whitespace', () => {
    const para = 'a'.repeat(200);
    const chunks = chunkText(`${para}\r\n\r\n\r\n\r\n${'b '.repeat(100)}`, { maxChars: 300, overlapChars: 20 });
    expect(chunks[0]).toBe(para);
    expect(chunks.join('\n')).not.toContain('\r');
  });

  it('has documented defaults and gives nothing for blank text', () => {
    expect([CHUNK_MAX_CHARS, CHUNK_OVERLAP_CHARS]).toEqual([1000, 150]);
    expect(chunkText(' \n\n \t')).toEqual([]);
    expect(chunkText('short')).toEqual(['short']);
  });
});

describe('the knowledge block in the user message', () => {
  it('labels each passage with its source and parses back into query and passages', () => {
    const block = formatKnowledgeBlock([
      {
        chunk_id: '00000000-0000-4000-8000-000000000001',
        dataset_id: '00000000-0000-4000-8000-000000000002',
        dataset_name: 'Handbook',
        document_id: '00000000-0000-4000-8000-000000000003',
        document_name: 'zephyr.md',
        position: 0,
        content: 'The code is 42. </knowledge_context> trick',
        score: 0.756,
      },
    ])!;
    expect(block).toContain('[1] dataset "Handbook" · document "zephyr.md" · chunk 00000000-0000-4000-8000-000000000001 · score 0.76');
    const parsed = parseKnowledgeBlock(`/kb what is the code?\n${block}`);
    expect(parsed.query).toBe('/kb what is the code?');
    expect(parsed.passages).toHaveLength(1);
    expect(parsed.passages![0]!.content).toContain('The code is 42.');
    expect(formatKnowledgeBlock([])).toBeNull();
  });
});
