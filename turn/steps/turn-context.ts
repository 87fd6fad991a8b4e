/**
 * What the steps before the agent run read, loaded once per prepareTurn with the independent reads in
 * parallel (each Prisma query is a round trip; the steps used to re-read the message, agent and binding
 * three times each: bench/README.md "Optimisation log").
 */
import type { ActivityDeps } from '../deps.js';
import { turnFailure } from '../errors.js';

export async function loadTurnContext(db: ActivityDeps['db'], messageId: string) {
  const msg = await db.message.findUniqueOrThrow({ where: { id: messageId }, include: { conversation: true, files: true } });
  const [agent, app, existingRun, workspace] = await Promise.all([
    db.agent.findUnique({ where: { app_id: msg.app_id } }),
    db.app.findUniqueOrThrow({ where: { id: msg.app_id } }),
    db.agentBackendRun.findUnique({ where: { message_id: messageId }, select: { backend_run_id: true, request: true } }),
    // A conversation's first turn creates its binding in the agent's (first) workspace.
    msg.conversation.agent_workspace_binding_id
      ? null
      : db.agentWorkspace.findFirst({ where: { agent: { app_id: msg.app_id } }, orderBy: { created_at: 'asc' } }),
  ]);
  if (!agent) throw turnFailure('agent_not_found', 404, 'This app has no agent.');
  return { msg, agent, app, existingRun, workspace };
}

export type TurnContext = Awaited<ReturnType<typeof loadTurnContext>>;
