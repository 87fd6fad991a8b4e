/**
 * The agent stub (docs/PROTOCOL.md §4, docs/seeds/004): `GET|PUT /agent-stub/config/prompt` and
 * `GET /agent-stub/config/manifest` (the config without the prompt), called by the
 * `dify-agent` CLI inside the agent's sandbox with the run's stub token. It forwards to the api's
 * inner agent-config endpoint with the run's signed execution context; the api derives tenant, agent,
 * user and version scope from that context alone.
 */
import express, { type Request, type Router } from 'express';
import { z } from 'zod';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { CreateRunRequest, ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { HttpError } from '../errors.js';
import type { PgRunStore } from '../store.js';
import { verifyStubToken } from '../stub-token.js';

export interface StubRoutesDeps {
  store: PgRunStore;
  logger: Logger;
  apiUrl: string;
  innerApiKey: string;
  tokenSecret: string;
  fetch?: typeof fetch;
  maxJsonDepth?: number;
}

const PromptBody = z.object({ prompt: z.string() }).strict();
/** The only body the stub takes is a prompt (the api caps it at 100,000 characters). */
const STUB_MAX_BODY_BYTES = 512 * 1024;

export function stubRoutes(deps: StubRoutesDeps): Router {
  const router = express.Router();
  const doFetch = deps.fetch ?? fetch;
  // The token's MAC is checked (no I/O) before any body is read; the run's state is checked in contextOf.
  router.use('/agent-stub', (req, _res, next) => {
    next(stubRunId(deps, req) ? undefined : new HttpError(401, 'unauthorized', 'a valid agent stub token is required'));
  });
  router.use('/agent-stub', jsonBody({ limit: STUB_MAX_BODY_BYTES, maxDepth: deps.maxJsonDepth, rejectNul: true }));

  const forward = async (req: Request, method: 'GET' | 'PUT', body?: string, what: 'prompt' | 'manifest' = 'prompt') => {
    const { context, runId } = await contextOf(deps, req);
    const url = `${deps.apiUrl.replace(/\/+$/, '')}/inner/api/agent-config/${encodeURIComponent(context.agent_id)}/${what}`;
    let upstream: globalThis.Response;
    try {
      upstream = await doFetch(url, {
        method,
        headers: {
          'x-inner-api-key': deps.innerApiKey,
          'x-agent-execution-context': Buffer.from(JSON.stringify(context)).toString('base64'),
          // The api honours the context only from the run of its turn (issue 17 L2).
          'x-agent-run-id': runId,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body,
      });
    } catch (err) {
      deps.logger.warn({ err }, 'agent stub: inner agent-config endpoint unreachable');
      throw new HttpError(502, 'upstream_unavailable', 'the agent configuration service is unreachable');
    }
    const text = await upstream.text();
    return { status: upstream.status, text, type: upstream.headers.get('content-type') ?? 'application/json' };
  };

  router.get('/agent-stub/config/prompt', async (req, res) => {
    const r = await forward(req, 'GET');
    res.status(r.status).type(r.type).send(r.text);
  });

  // The config manifest (issue 31): the saved config without the prompt, same scope rules (the api applies them).
  router.get('/agent-stub/config/manifest', async (req, res) => {
    const r = await forward(req, 'GET', undefined, 'manifest');
    res.status(r.status).type(r.type).send(r.text);
  });

  router.put('/agent-stub/config/prompt', async (req, res) => {
    const body = PromptBody.safeParse(req.body);
    if (!body.success) throw new HttpError(400, 'invalid_request', 'body must be {"prompt": "<text>"} with a string prompt');
    const r = await forward(req, 'PUT', JSON.stringify(body.data));
    res.status(r.status).type(r.type).send(r.text);
  });

  return router;
}

function stubRunId(deps: StubRoutesDeps, req: Request): string | null {
  const m = /^Bearer\s+(.+)$/i.exec(req.get('authorization') ?? '');
  return m ? verifyStubToken(deps.tokenSecret, m[1].trim()) : null;
}

/** The signed execution context of the run the stub token belongs to. */
async function contextOf(deps: StubRoutesDeps, req: Request) {
  const runId = stubRunId(deps, req);
  if (!runId) throw new HttpError(401, 'unauthorized', 'a valid agent stub token is required');
  const run = await deps.store.getRun(runId);
  if (!run || run.status !== 'running')
    throw new HttpError(401, 'unauthorized', 'the agent stub token belongs to a run that is not running');
  const request = CreateRunRequest.parse(run.request);
  const configLayer = request.composition.layers.find((l) => l.type === 'config');
  if (!configLayer) throw new HttpError(403, 'forbidden', 'this run has no config layer; agent configuration access is not enabled');
  const ecName = typeof configLayer.config.execution_context === 'string' ? configLayer.config.execution_context : 'execution_context';
  const ecLayer = request.composition.layers.find((l) => l.name === ecName && l.type === 'execution_context');
  if (!ecLayer) throw new HttpError(403, 'forbidden', 'this run has no execution context');
  return { context: ExecutionContextLayerConfig.parse(ecLayer.config), runId };
}
