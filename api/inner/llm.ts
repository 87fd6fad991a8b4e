/**
 * POST /inner/api/agent/llm/invoke (docs/PROTOCOL.md §3.1): the agent backend's every model call. HTTP only:
 * key check, body validation, the run's signed execution context (scope), SSE framing and "caller disconnected →
 * abort the provider call"; credentials, credits and streaming live in core/domain/llm/invoke.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import { isDependencyUnavailable } from '../../core/platform/dependency-errors.js';
import type { PrismaClient } from '../../core/generated/prisma/client.js';
import { parseEncryptionKey } from '../../core/domain/llm/credentials.js';
import { createLlmInvoker, type Clock } from '../../core/domain/llm/invoke.js';
import { modelInputParts } from '../../core/domain/llm/model-input.js';
import { GatewayCache, setProcessGatewayCache, type InvalidationSource } from '../../core/domain/llm/gateway-cache.js';
import type { ProviderRegistry } from '../../core/domain/llm/provider.js';
import type { Logger } from '../../core/platform/logger.js';
import type { ErrorCode } from '../../core/protocol/error-codes.js';
import { InvokeRequest, type InvokeRequestParsed } from '../../core/protocol/inner-llm.js';
import { uploadsDir, verifyFileSignature } from '../../core/domain/uploads.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import { startSse, writeSse, writeSseComment } from '../../core/platform/sse.js';
import { HttpError } from '../errors.js';
import { requireInnerApiKey } from './auth.js';
import { verifyForwardedContext } from './execution-context.js';

export interface InnerLlmRouterDeps {
  db: PrismaClient;
  config: Pick<Config, 'INNER_API_KEY' | 'ENCRYPTION_KEY' | 'EXECUTION_CONTEXT_SIGNING_KEY'>;
  logger: Logger;
  providers: ProviderRegistry;
  clock?: Clock;
  /**
   * Where uploads live (DATA_DIR): images given as our own signed file links are sent to the provider as
   * inline bytes, never as a link to the api's (internal) address (issue 17 L5). Unset: links pass as they are.
   */
  uploads?: { dataDir: string };
  /** Nesting limit of the request body (JSON_MAX_DEPTH). */
  maxJsonDepth?: number;
  /** Keep-alive comment interval while a model is slow to answer, ms (default 10 s). */
  pingMs?: number;
  /**
   * The process's LISTEN connection (EventNotifier): with it, credentials and pool verdicts are cached in process and
   * dropped on NOTIFY gateway_cache (core/domain/llm/gateway-cache.ts); the cache becomes the process's, so a worker
   * in this process reads a turn's credentials through it too. Without it every call reads them.
   */
  notifier?: InvalidationSource;
}

/** Mount at `/inner/api/agent/llm`. */
export function createInnerLlmRouter(deps: InnerLlmRouterDeps): Router {
  const log = deps.logger.child({ component: 'inner-llm' });
  const cache = deps.notifier ? new GatewayCache(deps.notifier) : undefined;
  if (cache) setProcessGatewayCache(cache);
  const invoker = createLlmInvoker({
    db: deps.db,
    providers: deps.providers,
    encryptionKey: parseEncryptionKey(deps.config.ENCRYPTION_KEY),
    logger: log,
    clock: deps.clock,
    cache,
  });
  const pingMs = deps.pingMs ?? 10_000;
  const router = express.Router();
  router.use(requireInnerApiKey(deps.config.INNER_API_KEY));

  // Model transcripts may carry NUL (tool output), which PostgreSQL's jsonb refuses: the recorded model input (core/domain/llm/model-input.ts) leaves it out.
  router.post('/invoke', jsonBody({ limit: '20mb', maxDepth: deps.maxJsonDepth }), async (req: Request, res: Response) => {
    const parsed = InvokeRequest.safeParse(req.body);
    if (!parsed.success) {
      sendError(res, 400, 'invalid_request', formatIssues(parsed.error));
      return;
    }
    // Created before any await so a disconnect during preparation is not missed.
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort(new Error('caller disconnected'));
    });

    // Scope comes only from the run's signed execution context (issue 28): the inner key alone names no tenant.
    let messageId: string;
    try {
      ({ caller: parsed.data.caller, messageId } = await scopedCaller(deps, parsed.data));
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      sendError(res, err.status, err.code, err.message);
      return;
    }
    if (deps.uploads) await inlineOwnImages(deps.db, { ...deps.config, ...deps.uploads }, parsed.data.target.prompt_messages);
    const prepared = await invoker.prepare(parsed.data, { messageId });
    if (!prepared.ok) {
      sendError(res, prepared.status, prepared.code, prepared.message);
      return;
    }
    if (abort.signal.aborted) return;
    await recordModelInput(deps, log, messageId, parsed.data);

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
    // The body parser's other refusals (an unsupported charset or Content-Encoding: 415) are the caller's too.
    if (typeof e.status === 'number' && e.status >= 400 && e.status < 500)
      return sendError(res, e.status, 'invalid_request', e.message ?? 'bad request');
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

/**
 * What this model request is sent, for the studio inspector's context view (GET …/agent/messages/{id}/model-inputs):
 * one row per (message, call_index), a retried call overwriting its own. Best effort: a failure to record never fails
 * the call. An image is a note in the parts, never its bytes or link.
 */
async function recordModelInput(deps: InnerLlmRouterDeps, log: Logger, messageId: string, req: InvokeRequestParsed): Promise<void> {
  const { call_index: callIndex, tenant_id: tenantId } = req.caller;
  try {
    const parts = modelInputParts(req.target.prompt_messages, req.target.tools ?? []);
    await deps.db.messageModelInput.upsert({
      where: { message_id_call_index: { message_id: messageId, call_index: callIndex } },
      create: { message_id: messageId, call_index: callIndex, tenant_id: tenantId, parts },
      update: { parts, created_at: new Date() },
    });
  } catch (err) {
    log.warn({ err: (err as Error)?.message ?? String(err), message_id: messageId }, 'model input not recorded');
  }
}

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

/**
 * The caller with its scope taken from the verified execution context: signature, expiry, turn in progress and the
 * recorded backend run (= `agent_run_id`, which must also be `invocation_id`, so a billing id cannot name another run).
 * The caller's own copies of the scope must agree with the context (403 `caller_scope_mismatch`).
 */
async function scopedCaller(
  deps: InnerLlmRouterDeps,
  req: InvokeRequestParsed,
): Promise<{ caller: InvokeRequestParsed['caller']; messageId: string }> {
  const ctx = req.execution_context;
  if (!ctx) throw new HttpError(403, 'execution_context_required', "execution_context: the run's signed execution context is required.");
  const { caller } = req;
  const { messageId } = await verifyForwardedContext(deps.db, deps.config.EXECUTION_CONTEXT_SIGNING_KEY, ctx, caller.agent_run_id);
  if (caller.invocation_id !== caller.agent_run_id)
    throw new HttpError(403, 'caller_scope_mismatch', 'caller: invocation_id must be the agent_run_id.');
  const scope = {
    tenant_id: ctx.tenant_id,
    app_id: ctx.app_id,
    user_id: ctx.user_id,
    user_from: ctx.user_from,
    agent_id: ctx.agent_id,
    invoke_from: ctx.invoke_from,
  } as const;
  for (const [field, value] of Object.entries(scope)) {
    const given = caller[field as keyof typeof scope];
    if (given !== undefined && given !== value)
      throw new HttpError(403, 'caller_scope_mismatch', `caller: ${field} is not the execution context's.`);
  }
  return { caller: { ...caller, ...scope }, messageId };
}

function sendError(res: Response, status: number, code: ErrorCode, message: string): void {
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
