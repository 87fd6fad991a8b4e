/**
 * Document text extraction for knowledge uploads: plain text, Markdown (kept as written: its markup reads fine to a
 * model and to full-text search), HTML (html-to-text) and PDF (unpdf: a pdf.js build that runs offline, no worker,
 * nothing fetched). The kind comes from the MIME type, else from the file name's extension.
 *
 * Untrusted documents are parsed in a child process with limits (core/domain/knowledge/parse-sandbox.ts); these functions
 * are what runs there, and they enforce the limits a parser can check itself: PDF pages and decoded text bytes.
 */
import { convert } from 'html-to-text';
import { getDocumentProxy } from 'unpdf';
import { KnowledgeError } from './errors.js';

/** What one document may decode to; a limit hit is 400 `document_unreadable`. */
export interface ParseLimits {
  /** Most pages of a PDF. */
  maxPages: number;
  /** Most bytes (UTF-8) of extracted text. */
  maxTextBytes: number;
}

export const DEFAULT_PARSE_LIMITS: ParseLimits = { maxPages: 5_000, maxTextBytes: 20 * 1024 * 1024 };

const tooMuchText = (limits: ParseLimits) =>
  new KnowledgeError(400, 'document_unreadable', `The document decodes to more than ${limits.maxTextBytes} bytes of text.`);

export type DocumentKind = 'text' | 'markdown' | 'html' | 'pdf';

const BY_MIME: Record<string, DocumentKind> = {
  'text/plain': 'text',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'application/pdf': 'pdf',
};
const BY_EXTENSION: Record<string, DocumentKind> = {
  txt: 'text',
  text: 'text',
  md: 'markdown',
  markdown: 'markdown',
  html: 'html',
  htm: 'html',
  pdf: 'pdf',
};
export const KIND_MIME: Record<DocumentKind, string> = {
  text: 'text/plain',
  markdown: 'text/markdown',
  html: 'text/html',
  pdf: 'application/pdf',
};

/** The document's kind, or null when it is none we can read. Generic MIME types defer to the extension. */
export function documentKind(name: string, mimeType?: string | null): DocumentKind | null {
  const mime = (mimeType ?? '').split(';')[0]!.trim().toLowerCase();
  if (BY_MIME[mime]) return BY_MIME[mime];
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase();
  return ext ? (BY_EXTENSION[ext] ?? null) : null;
}

export async function extractDocumentText(kind: DocumentKind, bytes: Uint8Array, limits = DEFAULT_PARSE_LIMITS): Promise<string> {
  const text = await extract(kind, bytes, limits);
  if (Buffer.byteLength(text, 'utf8') > limits.maxTextBytes) throw tooMuchText(limits);
  return text;
}

async function extract(kind: DocumentKind, bytes: Uint8Array, limits: ParseLimits): Promise<string> {
  switch (kind) {
    case 'text':
    case 'markdown':
      return decodeUtf8(bytes);
    case 'html':
      return convert(decodeUtf8(bytes), {
        wordwrap: false,
        selectors: [
          { selector: 'a', options: { ignoreHref: true } },
          { selector: 'img', format: 'skip' },
        ],
      });
    case 'pdf':
      return pdfText(bytes, limits);
  }
}

function decodeUtf8(bytes: Uint8Array): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new KnowledgeError(400, 'document_unreadable', 'The document is not valid UTF-8 text.');
  }
  // NUL never occurs in text (and PostgreSQL text cannot store it): this is a binary file.
  if (text.includes('\u0000')) throw new KnowledgeError(400, 'document_unreadable', 'The document is binary, not text.');
  return text;
}

/**
 * The PDF's text layer, page by page (unpdf's extractText joins pages the same way, but reads them all at once and
 * without limits): refused when it has more than `maxPages` pages or its text grows past `maxTextBytes`.
 */
async function pdfText(bytes: Uint8Array, limits: ParseLimits): Promise<string> {
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>> | undefined;
  try {
    // pdf.js takes ownership of (detaches) the buffer it is given: hand it a copy.
    pdf = await getDocumentProxy(new Uint8Array(bytes), { stopAtErrors: false });
    if (pdf.numPages > limits.maxPages)
      throw new KnowledgeError(400, 'document_unreadable', `The PDF has ${pdf.numPages} pages; at most ${limits.maxPages} are read.`);
    const pages: string[] = [];
    let size = 0;
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n);
      const content = await page.getTextContent();
      const text = content.items.map((item) => ('str' in item && item.str != null ? item.str + (item.hasEOL ? '\n' : '') : '')).join('');
      page.cleanup();
      size += Buffer.byteLength(text, 'utf8') + 1;
      if (size > limits.maxTextBytes) throw tooMuchText(limits);
      pages.push(text);
    }
    const merged = pages
      .join('\n')
      .replace(/[^\S\n]+/g, ' ')
      .replace(/ ?\n ?/g, '\n')
      .replace(/\n{3,}/g, '\n\n');
    return merged.replaceAll('\u0000', '');
  } catch (err) {
    if (err instanceof KnowledgeError) throw err;
    throw new KnowledgeError(400, 'document_unreadable', `The PDF cannot be read: ${(err as Error)?.message ?? String(err)}`);
  } finally {
    await pdf?.cleanup().catch(() => undefined);
  }
}
