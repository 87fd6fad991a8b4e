/**
 * POST /inner/api/tools/invoke (docs/PROTOCOL.md §3): the agent backend's `tools` layer calls a provider tool through
 * the api, so tool credentials never leave the api (docs/security.md). The run's signed execution context scopes the
 * call: the provider must be the context's tenant's and the tool must be in the composition the api built for that
 * run (the agent config version the turn resolved). The answer is always an observation: `{result, is_error}`.
 */
import express, { type Router } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { createGuardedFetch, type FetchLike } from '../../core/platform/net/ssrf.js';
import { ExecutionContextLayerConfig, type CreateRunRequest } from '../../core/protocol/run.js';
import { ProviderName, ToolName } from '../../core/protocol/tool-names.js';
import { callProviderTool } from '../../core/domain/tools/invoke.js';
import { findProvider } from '../../core/domain/tools/providers.js';
import { HttpError, parseOr400 } from '../errors.js';
import { requireInnerApiKey } from './auth.js';
import { verifyForwardedContext } from './execution-context.js';

export const InvokeToolBody = z
  .object({
    execution_context: ExecutionContextLayerConfig,
    /** The backend run making the call (the one the api recorded for the context's message). */
    run_id: z.string().min(1).max(200),
    provider: ProviderName,
    name: ToolName,
    arguments: z.record(z.string(), z.unknown()),
  })
  .strict();

export interface InnerToolsDeps {
  db: Db;
  config: Pick<
    Config,
    | 'INNER_API_KEY'
    | 'EXECUTION_CONTEXT_SIGNING_KEY'
    | 'ENCRYPTION_KEY'
    | 'JSON_MAX_DEPTH'
    | 'TOOL_TIMEOUT_MS'
    | 'TOOL_MAX_RESPONSE_BYTES'
    | 'TOOL_ALLOW_PRIVATE_NETWORK'
  >;
  logger: Logger;
  toolFetch?: FetchLike;
}

export function innerToolRoutes(deps: InnerToolsDeps): Router {
  const { db, config } = deps;
  const fetch = deps.toolFetch ?? createGuardedFetch({ allowPrivate: config.TOOL_ALLOW_PRIVATE_NETWORK });
  const r = express.Router();
  r.use(requireInnerApiKey(config.INNER_API_KEY));
  r.use(jsonBody({ limit: '1mb', maxDepth: config.JSON_MAX_DEPTH, rejectNul: true }));

  r.post('/invoke', async (req, res) => {
    const body = parseOr400(InvokeToolBody, req.body);
    const ctx = body.execution_context;
    const { messageId } = await verifyForwardedContext(db, config.EXECUTION_CONTEXT_SIGNING_KEY, ctx, body.run_id);
    if (!(await inRunComposition(db, messageId, body.provider, body.name)))
      throw new HttpError(403, 'tool_not_in_config', `The tool ${body.provider}/${body.name} is not in this run's agent config.`);
    const provider = await findProvider(db, ctx.tenant_id, body.provider);
    if (!provider) throw new HttpError(404, 'tool_provider_not_found', `No tool provider named ${body.provider}.`);
    const started = Date.now();
    // The client's disconnect (the run was cancelled) abandons the call.
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const out = await callProviderTool(
      { fetch, encryptionKey: config.ENCRYPTION_KEY, timeoutMs: config.TOOL_TIMEOUT_MS, maxResponseBytes: config.TOOL_MAX_RESPONSE_BYTES },
      provider,
      body.name,
      body.arguments,
      abort.signal,
    );
    // Names and outcome only: arguments and answers may carry personal data, never secrets into logs either.
    deps.logger.info(
      {
        provider: body.provider,
        tool: body.name,
        kind: provider.kind,
        is_error: out.isError,
        status: out.status,
        ms: Date.now() - started,
      },
      'tool call',
    );
    res.json({ result: out.result, is_error: out.isError });
  });

  return r;
}

/** Whether the run request the api stored for this message offers the tool (its `tools` layer). */
async function inRunComposition(db: Db, messageId: string, provider: string, name: string): Promise<boolean> {
  const run = await db.agentBackendRun.findUnique({ where: { message_id: messageId }, select: { request: true } });
  const request = run?.request as CreateRunRequest | null | undefined;
  const layers = request?.composition?.layers ?? [];
  return layers.some(
    (l) =>
      l.type === 'tools' &&
      Array.isArray((l.config as { tools?: unknown }).tools) &&
      ((l.config as { tools: { provider?: string; name?: string }[] }).tools ?? []).some((t) => t.provider === provider && t.name === name),
  );
}
