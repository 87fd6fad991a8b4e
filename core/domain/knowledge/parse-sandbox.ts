/**
 * Document parsing off the event loop (issue 28 item 3): a child process per document (core/domain/knowledge/parse-child.ts)
 * with an address-space limit (`ulimit -v`, so typed arrays and pdf.js' decoded streams count, not only the V8 heap),
 * a V8 heap limit (a quarter of it), a wall-clock limit (SIGKILL) and the parser's own caps on pages and decoded text
 * bytes. Any limit hit is 400 `document_unreadable`. A child rather than a worker thread: a worker's resourceLimits
 * cover only its V8 heap — a PDF compression bomb grows ArrayBuffers, which would still be this process's memory —
 * and a runaway parse is killed without touching the api.
 *
 * Small plain text and Markdown (≤ IN_PROCESS_MAX_BYTES) are prepared in-process: decoding and chunking a few KB costs
 * less than starting a process, and nothing in them can blow up.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isCompiled, projectRoot } from '../../platform/project-root.js';
import type { ErrorCode } from '../../protocol/error-codes.js';
import { KnowledgeError } from './errors.js';
import type { DocumentKind, ParseLimits } from './parse.js';
import type { ChunkOptions } from './chunk.js';
import { prepareDocument, type PreparedDocument } from './prepare.js';

export interface SandboxLimits extends ParseLimits {
  /** Wall-clock limit of one parse, ms. */
  timeoutMs: number;
  /** Address space of the child, MB (its V8 heap: a quarter). */
  memoryMb: number;
}

export const IN_PROCESS_MAX_BYTES = 64 * 1024;

const here = path.dirname(fileURLToPath(import.meta.url));
const compiled = isCompiled(import.meta.url);
const CHILD = path.join(here, compiled ? 'parse-child.js' : 'parse-child.ts');

const unreadable = (why: string) => new KnowledgeError(400, 'document_unreadable', `The document cannot be read: ${why}.`);

export async function prepareInSandbox(
  kind: DocumentKind,
  bytes: Uint8Array,
  limits: SandboxLimits,
  chunking: ChunkOptions = {},
): Promise<PreparedDocument> {
  if ((kind === 'text' || kind === 'markdown') && bytes.byteLength <= IN_PROCESS_MAX_BYTES)
    return prepareDocument(kind, bytes, limits, chunking);
  return runChild(kind, bytes, limits, chunking);
}

function runChild(kind: DocumentKind, bytes: Uint8Array, limits: SandboxLimits, chunking: ChunkOptions): Promise<PreparedDocument> {
  const heapMb = Math.max(64, Math.floor(limits.memoryMb / 4));
  const nodeArgs = [
    // WebAssembly memories reserve ~10 GB of address space for their guard regions unless the trap handler is off;
    // under `ulimit -v` they could not be created at all (tsx's lexer and pdf.js' decoders use WebAssembly).
    '--disable-wasm-trap-handler',
    ...(compiled ? [] : ['--import', 'tsx']),
    `--max-old-space-size=${heapMb}`,
    CHILD,
    JSON.stringify({ kind, limits: { maxPages: limits.maxPages, maxTextBytes: limits.maxTextBytes }, chunking }),
  ];
  // `ulimit -v` (RLIMIT_AS, KB) is set by the shell on itself, then it becomes node: the limit covers the whole child.
  const child = spawn('/bin/sh', ['-c', 'ulimit -v "$PARSE_AS_KB" || exit 97; exec "$0" "$@"', process.execPath, ...nodeArgs], {
    cwd: projectRoot(import.meta.url),
    // MALLOC_ARENA_MAX: glibc reserves 64 MB of address space per thread's malloc arena; Node 24 starts with ~1.25 GB
    // of reservations (Node 20: ~0.7 GB), which left a 2 GB limit no room for a thread more (tsx's esbuild worker).
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      PARSE_AS_KB: String(limits.memoryMb * 1024),
      NODE_ENV: 'production',
      MALLOC_ARENA_MAX: '2',
    },
    stdio: ['pipe', 'pipe', 'pipe', 'ipc'],
  });
  // Chunks overlap and JSON escapes: the answer is bounded by a few times the text limit.
  const maxOut = limits.maxTextBytes * 3 + 1024 * 1024;
  return new Promise<PreparedDocument>((resolve, reject) => {
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let why: string | null = null;
    const kill = (reason: string) => {
      why ??= reason;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => kill(`parsing took longer than ${Math.round(limits.timeoutMs / 1000)} s`), limits.timeoutMs);
    child.stdout!.on('data', (c: Buffer) => {
      outBytes += c.length;
      if (outBytes > maxOut) kill(`it decodes to more than ${limits.maxTextBytes} bytes of text`);
      else out.push(c);
    });
    child.stderr!.on('data', (c: Buffer) => {
      if (err.length < 8192) err += c.toString('utf8');
    });
    // Every stream of the child has its error handled (issue 28 item 1): a child killed mid-write is an EPIPE here.
    child.stdin!.on('error', () => undefined);
    child.stdout!.on('error', () => undefined);
    child.stderr!.on('error', () => undefined);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`the parse process could not start: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (why) return reject(unreadable(why));
      if (code === 97) return reject(new Error('the parse process could not set its address-space limit (ulimit -v)'));
      let answer: { ok: boolean; chunks?: string[]; tokens?: number[]; status?: number; code?: ErrorCode; message?: string } | null = null;
      try {
        answer = JSON.parse(Buffer.concat(out).toString('utf8'));
      } catch {
        answer = null;
      }
      if (answer?.ok && Array.isArray(answer.chunks) && Array.isArray(answer.tokens))
        return resolve({ chunks: answer.chunks, tokens: answer.tokens });
      if (answer && !answer.ok)
        return reject(
          new KnowledgeError((answer.status ?? 400) as 400, answer.code ?? 'document_unreadable', answer.message ?? 'unreadable'),
        );
      // No answer: the child died. Out of memory shows as an allocation failure or a V8 fatal error (SIGABRT/SIGTRAP).
      // Under `ulimit -v` a failed allocation may also surface as SIGSEGV.
      const oom = /out of memory|allocation failed|heap limit|Cannot allocate|ENOMEM|reserve virtual memory/i.test(err);
      reject(
        unreadable(
          oom
            ? `parsing needed more than its ${limits.memoryMb} MB memory limit`
            : `the parser crashed (${signal ?? `exit ${code}`}) within its ${limits.memoryMb} MB memory limit`,
        ),
      );
    });
    child.stdin!.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });
}
