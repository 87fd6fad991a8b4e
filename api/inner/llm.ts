/**
 * POST /inner/api/agent/llm/invoke (docs/PROTOCOL.md §3): the agent backend's every model call. HTTP only:
 * key check, body validation, SSE framing and "caller disconnected → abort the provider call";
 * credentials, credits and streaming live in core/llm/invoke.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { z } from 'zod';
import type { Config } from '../../core/config.js';
import { isDependencyUnavailable } from '../../core/dependency-errors.js';
import type { PrismaClient } from '../../core/generated/prisma/client.js';
import { parseEncryptionKey } from '../../core/llm/credentials.js';
import { createLlmInvoker, type Clock } from '../../core/llm/invoke.js';
import type { ProviderRegistry } from '../../core/llm/provider.js';
import type { Logger } from '../../core/logger.js';
import { InvokeRequest, type InvokeRequestParsed } from '../../core/protocol/inner-llm.js';
import { uploadsDir, verifyFileSignature } from '../../core/uploads.js';
import { jsonBody } from '../../core/json-guard.js';
import { startSse, writeSse, writeSseComment } from '../../core/sse.js';
import { requireInnerApiKey } from './auth.js';

export interface InnerLlmRouterDeps {
  db: PrismaClient;
  config: Pick<Config, 'INNER_API_KEY' | 'ENCRYPTION_KEY'>;
  logger: Logger;
  providers: ProviderRegistry;
  clock?: Clock;
  /**
   * `verify` (the api's wiring): the caller's app must exist and belong to the caller's tenant, else 403;
   * the credentials and credits used are the tenant's (issue 17 L2). `trust`: unit tests with made-up ids.
   */
  callerScope?: 'verify' | 'trust';
  /**
   * Where uploads live (DATA_DIR): images given as our own signed file links are sent to the provider as
   * inline bytes, never as a link to the api's (internal) address (issue 17 L5). Unset: links pass as they are.
   */
  uploads?: { dataDir: string };
  /** Nesting limit of the request body (JSON_MAX_DEPTH). */
  maxJsonDepth?: number;
  /** Keep-alive comment interval while a model is slow to answer, ms (default 10 s). */
  pingMs?: number;
}

/** Mount at `/inner/api/agent/llm`. */
export function createInnerLlmRouter(deps: InnerLlmRouterDeps): Router {
  const log = deps.logger.child({ component: 'inner-llm' });
  const invoker = createLlmInvoker({
    db: deps.db,
    providers: deps.providers,
    encryptionKey: parseEncryptionKey(deps.config.ENCRYPTION_KEY),
    logger: log,
    clock: deps.clock,
  });
  const pingMs = deps.pingMs ?? 10_000;
  const router = express.Router();
  router.use(requireInnerApiKey(deps.config.INNER_API_KEY));

  // Model transcripts may carry NUL (tool output); they are not stored from here, so only size and depth are limited.
  router.post('/invoke', jsonBody({ limit: '20mb', maxDepth: deps.maxJsonDepth }), async (req: Request, res: Response) => {
    const parsed = InvokeRequest.safeParse(req.body);
    if (!parsed.success) {
      sendError(res, 400, 'invalid_request', formatIssues(parsed.error));
      return;
    }
    const scope = deps.callerScope === 'verify' ? await callerScopeProblem(deps.db, parsed.data.caller) : null;
    if (scope) {
      sendError(res, 403, 'caller_scope_mismatch', scope);
      return;
    }
    // Created before any await so a disconnect during preparation is not missed.
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort(new Error('caller disconnected'));
    });

    if (deps.uploads) await inlineOwnImages(deps.db, { ...deps.config, ...deps.uploads }, parsed.data.target.prompt_messages);
    const prepared = await invoker.prepare(parsed.data);
    if (!prepared.ok) {
      sendError(res, prepared.status, prepared.code, prepared.message);
      return;
    }
    if (abort.signal.aborted) return;

    startSse(res);
    const ping = setInterval(() => writeSseComment(res, 'ping'), pingMs);
    try {
      for await (const chunk of prepared.run(abort.signal)) {
        if (abort.signal.aborted) break;
        if (!writeSse(res, { data: chunk })) await drained(res, abort.signal);
      }
    } finally {
      clearInterval(ping);
      if (!res.writableEnded) res.end();
    }
  });

  router.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const e = err as { type?: string; status?: number; message?: string };
    if (e.type === 'entity.parse.failed') return sendError(res, 400, 'invalid_request', 'body: not valid JSON');
    if (e.type === 'entity.too.large') return sendError(res, 413, 'invalid_request', 'body: too large');
    if (e.status === 400) return sendError(res, 400, 'invalid_request', e.message ?? 'bad request');
    // The database away before streaming (credentials, quota, scope): a retryable 503, not a bug (issue 30).
    if (isDependencyUnavailable(err)) {
      log.warn({ err: e.message ?? String(err) }, 'inner llm invoke: database unreachable before streaming');
      res.set('Retry-After', '2');
      return sendError(res, 503, 'service_unavailable', 'the database is unreachable; retry shortly');
    }
    log.error({ err: e.message ?? String(err) }, 'inner llm invoke failed before streaming');
    sendError(res, 500, 'internal_error', 'the inner LLM invoke failed; see the api logs');
  });
  return router;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const OWN_FILE_PATH = /^\/files\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/file-preview$/;

/** The upload a (valid, unexpired) signed file link of ours names, or null. */
function ownFileOf(config: Pick<Config, 'ENCRYPTION_KEY'>, raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  const id = OWN_FILE_PATH.exec(url.pathname)?.[1];
  return id && verifyFileSignature(config, id, url.searchParams.get('expires') ?? undefined, url.searchParams.get('sign') ?? undefined)
    ? id
    : null;
}

/** Replaces image parts that link to our own uploads with their bytes (the provider never gets the link). */
export async function inlineOwnImages(
  db: PrismaClient,
  config: Pick<Config, 'ENCRYPTION_KEY'> & { dataDir: string },
  messages: InvokeRequestParsed['target']['prompt_messages'],
): Promise<void> {
  for (const m of messages) {
    if (m.role !== 'user' || typeof m.content === 'string') continue;
    for (const [i, part] of m.content.entries()) {
      if (part.type !== 'image' || !part.url) continue;
      const fileId = ownFileOf(config, part.url);
      if (!fileId) continue;
      const file = await db.uploadFile.findUnique({ where: { id: fileId } });
      if (!file) continue;
      const bytes = await fs.promises.readFile(path.join(uploadsDir(config as Config), file.storage_key)).catch(() => null);
      if (bytes) m.content[i] = { type: 'image', base64_data: bytes.toString('base64'), mime_type: file.mime_type };
    }
  }
}

/** Why the caller's scope does not hold (its app is not the tenant's, its agent not the app's), or null. One query. */
async function callerScopeProblem(
  db: PrismaClient,
  caller: { tenant_id: string; app_id: string; agent_id?: string },
): Promise<string | null> {
  const mismatch = 'caller: app_id does not belong to tenant_id';
  if (!UUID.test(caller.app_id) || !UUID.test(caller.tenant_id)) return mismatch;
  const app = await db.app.findUnique({ where: { id: caller.app_id }, select: { tenant_id: true, agent: { select: { id: true } } } });
  if (app?.tenant_id !== caller.tenant_id) return mismatch;
  if (caller.agent_id !== undefined && app.agent?.id !== caller.agent_id) return 'caller: agent_id is not the agent of app_id';
  return null;
}

function sendError(res: Response, status: number, code: string, message: string): void {
  res.status(status).json({ code, message, status });
}

/** `target.model: Invalid input: expected string, received undefined; ...` */
export function formatIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`)
    .join('; ');
}

function drained(res: Response, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
