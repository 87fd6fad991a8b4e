/**
 * The checks every inner route applies to an execution context the agent backend forwards (issue 17 L2,
 * core/exec-context.ts): signed with EXECUTION_CONTEXT_SIGNING_KEY, not expired, its turn still in progress, and —
 * once the api recorded the backend run of that turn — named by that run (X-Agent-Run-Id).
 */
import type { Db } from '../../core/db.js';
import { checkExecutionContext } from '../../core/exec-context.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';
import { HttpError } from '../errors.js';
import { Uuid } from '../schemas.js';

const IN_PROGRESS = new Set(['pending', 'running']);

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
  const message = await db.message.findUnique({ where: { id: messageId.data }, select: { tenant_id: true, app_id: true, status: true } });
  if (!message || message.tenant_id !== ctx.tenant_id || message.app_id !== ctx.app_id || !IN_PROGRESS.has(message.status)) throw ended();
  const run = await db.agentBackendRun.findUnique({ where: { message_id: messageId.data }, select: { backend_run_id: true } });
  if (run?.backend_run_id && run.backend_run_id !== runId) throw ended();
  return { messageId: messageId.data };
}
