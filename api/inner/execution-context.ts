/**
 * The checks every inner route applies to an execution context the agent backend forwards (issue 17 L2,
 * core/protocol/exec-context.ts): signed with EXECUTION_CONTEXT_SIGNING_KEY, not expired, its turn still in progress, and —
 * once the api recorded the backend run of that turn — named by that run (X-Agent-Run-Id / run_id / agent_run_id).
 * One statement (the message and its recorded run side by side): on the LLM route, called for every model request, it
 * replaces the app lookup that route made before (no round trip added), and a turn that ended is refused at once.
 */
import type { Db } from '../../core/platform/db.js';
import { checkExecutionContext } from '../../core/protocol/exec-context.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { HttpError } from '../errors.js';
import { Uuid } from '../schemas.js';

interface TurnRow {
  tenant_id: string;
  app_id: string;
  in_progress: boolean;
  backend_run_id: string | null;
}

export async function verifyForwardedContext(
  db: Db,
  signingKey: string,
  ctx: ExecutionContextLayerConfig,
  runId: string | undefined,
): Promise<{ messageId: string }> {
  const verdict = checkExecutionContext(ctx, signingKey);
  if (!verdict.ok) {
    if (verdict.reason === 'expired') throw new HttpError(403, 'execution_context_expired', 'The execution context has expired.');
    throw new HttpError(403, 'invalid_execution_context', 'The execution context signature is invalid.');
  }
  const ended = () => new HttpError(403, 'execution_context_ended', 'The run this execution context belongs to is not in progress.');
  const messageId = Uuid.safeParse(ctx.message_id);
  if (!messageId.success) throw ended();
  const [row] = await db.$queryRaw<TurnRow[]>`
    select m.tenant_id::text as tenant_id, m.app_id::text as app_id, m.status in ('pending', 'running') as in_progress,
           r.backend_run_id
      from messages m left join agent_backend_runs r on r.message_id = m.id
     where m.id = ${messageId.data}::uuid`;
  if (!row || row.tenant_id !== ctx.tenant_id || row.app_id !== ctx.app_id || !row.in_progress) throw ended();
  if (row.backend_run_id && row.backend_run_id !== runId) throw ended();
  return { messageId: messageId.data };
}
