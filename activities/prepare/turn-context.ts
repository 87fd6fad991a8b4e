/**
 * What the steps before the agent run read, loaded once per turn attempt in ONE statement (core/platform/hot-sql.ts
 * `readTurnContextRow`; through Prisma it was two rounds of six or seven: docs/decisions/0009-preparation-in-eight-statements.md):
 * the message (with its conversation and files) and its run row, the agent, the app and, for a published
 * conversation that has one, its binding with the binding's workspace (resolve-config.ts and binding.ts use it,
 * neither reads it again). runAgent reads it first and hands it to the preparation.
 */
import { readTurnContextRow, type TurnContextRow } from '../../core/platform/hot-sql.js';
import type { ActivityDeps } from '../deps.js';
import { turnFailure } from '../errors.js';

export type TurnContextRead = TurnContextRow;

export function readTurnContext(db: ActivityDeps['db'], messageId: string): Promise<TurnContextRead> {
  return readTurnContextRow(db, messageId);
}

/** `first`: the read, when the caller has just made it (runAgent). */
export async function loadTurnContext(db: ActivityDeps['db'], messageId: string, first?: TurnContextRead) {
  const { agent, app, ...rest } = first ?? (await readTurnContext(db, messageId));
  // As Prisma's findUniqueOrThrow did: a message of a deleted app is not prepared (api/apps delete refuses a busy app).
  if (!app) throw new Error(`app of message ${messageId} not found`);
  if (!agent) throw turnFailure('agent_not_found', 404, 'This app has no agent.');
  return { ...rest, agent, app };
}

export type TurnContext = Awaited<ReturnType<typeof loadTurnContext>>;
