/**
 * The parse child (issue 28 item 3): one document's bytes on stdin → `{ok: true, chunks, tokens}` or `{ok: false,
 * status, code, message}` as JSON on stdout. Started by core/domain/knowledge/parse-sandbox.ts under an address-space limit
 * (ulimit -v), a V8 heap limit and a wall-clock limit, so that a PDF that takes minutes or gigabytes (a compression
 * bomb, thousands of pages) costs this process, not the api's event loop or its memory. Arguments: argv[2] is
 * `{kind, limits, chunking}` as JSON. Exits when its parent goes away (the IPC channel closes).
 */
import type { ChunkOptions } from './chunk.js';
import { KnowledgeError } from './errors.js';
import type { DocumentKind, ParseLimits } from './parse.js';
import { prepareDocument } from './prepare.js';

process.on('disconnect', () => process.exit(3));

const { kind, limits, chunking } = JSON.parse(process.argv[2] ?? '{}') as {
  kind: DocumentKind;
  limits: ParseLimits;
  chunking?: ChunkOptions;
};
const input: Buffer[] = [];
for await (const chunk of process.stdin) input.push(chunk as Buffer);

let out: unknown;
try {
  out = { ok: true, ...(await prepareDocument(kind, Buffer.concat(input), limits, chunking)) };
} catch (err) {
  out =
    err instanceof KnowledgeError
      ? { ok: false, status: err.status, code: err.code, message: err.message }
      : { ok: false, status: 400, code: 'document_unreadable', message: `The document cannot be read: ${(err as Error)?.message ?? err}` };
}
process.stdout.write(JSON.stringify(out), () => process.exit(0));
