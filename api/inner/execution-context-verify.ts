/**
 * POST /inner/api/agent/execution-context/verify (docs/PROTOCOL.md §3, issue 27): the agent backend asks, once per
 * run with a runtime layer and before it enters, whether the run may use the workspace it names. The backend does
 * not hold EXECUTION_CONTEXT_SIGNING_KEY (it could not mint a context), so the api decides: the context's
 * signature, expiry and turn (verifyForwardedContext: in progress, and named by its recorded backend run), the
 * workspace the context was signed with, and the workspace of the binding that turn's run was built for. A forged
 * `POST /runs` naming another tenant's workspace fails one of these; the run then ends `workspace_not_authorized`.
 */
import express, { type Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { HttpError, parseOr400 } from '../errors.js';
import { requireInnerApiKey } from './auth.js';
import { verifyForwardedContext } from './execution-context.js';

export const VerifyWorkspaceBody = z
  .object({
    execution_context: ExecutionContextLayerConfig,
    workspace_id: z.string().uuid(),
    run_id: z.string().min(1).max(200),
  })
  .strict();

export interface InnerExecutionContextDeps {
  db: Db;
  innerApiKey: string;
  signingKey: string;
  /** Whether EXECUTION_CONTEXT_SIGNING_KEY is still the public development default: then nothing is authorized. */
  signingKeyIsDefault: boolean;
  maxJsonDepth?: number;
}

const refused = (message: string) => new HttpError(403, 'workspace_not_authorized', message);

export function innerExecutionContextRoutes(deps: InnerExecutionContextDeps): Router {
  const r = express.Router();
  r.use(requireInnerApiKey(deps.innerApiKey));
  r.use(jsonBody({ limit: '256kb', maxDepth: deps.maxJsonDepth, rejectNul: true }));

  r.post('/verify', async (req, res) => {
    const body = parseOr400(VerifyWorkspaceBody, req.body);
    if (deps.signingKeyIsDefault)
      throw refused(
        'EXECUTION_CONTEXT_SIGNING_KEY holds its public development default, so any context could be forged: set your own (npm start generates it into DATA_DIR/secrets.json).',
      );
    const ctx = body.execution_context;
    try {
      await verifyForwardedContext(deps.db, deps.signingKey, ctx, body.run_id);
    } catch (err) {
      if (err instanceof HttpError) throw refused(`the run's execution context is not honoured: ${err.message}`);
      throw err;
    }
    if (!ctx.workspace_id) throw refused('the execution context was signed without a workspace: this run may not use one.');
    if (ctx.workspace_id.toLowerCase() !== body.workspace_id.toLowerCase())
      throw refused(`the execution context was signed for workspace ${ctx.workspace_id}, not ${body.workspace_id}.`);
    const [row] = await deps.db.$queryRaw<{ workspace_id: string; tenant_id: string; app_id: string; retired: boolean }[]>`
      select b.workspace_id::text as workspace_id, b.tenant_id::text as tenant_id, b.app_id::text as app_id,
             (b.retired_at is not null or w.status <> 'active') as retired
        from agent_backend_runs r
        join agent_workspace_bindings b on b.id = r.binding_id
        join agent_workspaces w on w.id = b.workspace_id
       where r.message_id = ${ctx.message_id}::uuid`;
    if (!row) throw refused("the run's turn has no workspace binding.");
    if (row.tenant_id !== ctx.tenant_id || row.app_id !== ctx.app_id || row.workspace_id !== body.workspace_id.toLowerCase())
      throw refused("the workspace is not the one of the run's binding.");
    if (row.retired) throw refused("the binding's workspace is retired.");
    res.json({ ok: true, workspace_id: row.workspace_id });
  });

  return r;
}
