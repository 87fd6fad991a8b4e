/**
 * What the steps before the agent run read, loaded once per preparation in two rounds of parallel reads (each
 * Prisma query is a round trip; docs/decisions/0009-preparation-in-eight-statements.md): the message (with its conversation and
 * files) and its run row, then what they point at — the agent, the app and, for a published conversation that
 * has one, its binding with the binding's workspace (resolve-config.ts and binding.ts use it, neither reads it
 * again).
 */
import type { ActivityDeps } from '../deps.js';
import { turnFailure } from '../errors.js';

export function readTurnMessage(db: ActivityDeps['db'], messageId: string) {
  return Promise.all([
    db.message.findUniqueOrThrow({ where: { id: messageId }, include: { conversation: true, files: true } }),
    db.agentBackendRun.findUnique({ where: { message_id: messageId } }),
  ]);
}

export type TurnMessageRead = Awaited<ReturnType<typeof readTurnMessage>>;

/** `first`: the first round, when the caller has just read it (runAgent). */
export async function loadTurnContext(db: ActivityDeps['db'], messageId: string, first?: TurnMessageRead) {
  const [msg, existingRun] = first ?? (await readTurnMessage(db, messageId));
  // A debugger turn's session is the draft's (resolve-config.ts), never the conversation's binding.
  const bindingId = msg.invoke_from === 'debugger' ? null : msg.conversation.agent_workspace_binding_id;
  const [agent, app, conversationBinding] = await Promise.all([
    db.agent.findUnique({ where: { app_id: msg.app_id } }),
    db.app.findUniqueOrThrow({ where: { id: msg.app_id } }),
    bindingId ? db.agentWorkspaceBinding.findUnique({ where: { id: bindingId }, include: { workspace: true } }) : null,
  ]);
  if (!agent) throw turnFailure('agent_not_found', 404, 'This app has no agent.');
  return { msg, agent, app, existingRun, conversationBinding };
}

export type TurnContext = Awaited<ReturnType<typeof loadTurnContext>>;
