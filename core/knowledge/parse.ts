/**
 * Document text extraction for knowledge uploads: plain text, Markdown (kept as written: its markup reads fine to a
 * model and to full-text search), HTML (html-to-text) and PDF (unpdf: a pdf.js build that runs offline, no worker,
 * nothing fetched). The kind comes from the MIME type, else from the file name's extension.
 */
import { convert } from 'html-to-text';
import { extractText, getDocumentProxy } from 'unpdf';
import { KnowledgeError } from './errors.js';

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

export async function extractDocumentText(kind: DocumentKind, bytes: Uint8Array): Promise<string> {
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
      return pdfText(bytes);
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

async function pdfText(bytes: Uint8Array): Promise<string> {
  try {
    // pdf.js takes ownership of (detaches) the buffer it is given: hand it a copy.
    const pdf = await getDocumentProxy(new Uint8Array(bytes), { stopAtErrors: false });
    const { text } = await extractText(pdf, { mergePages: true });
    await pdf.cleanup().catch(() => undefined);
    return text.replaceAll('\u0000', '');
  } catch (err) {
    throw new KnowledgeError(400, 'document_unreadable', `The PDF cannot be read: ${(err as Error)?.message ?? String(err)}`);
  }
}
