/** What every part of one runAgent attempt works with: the turn's rows, its logger and its committed state. */
import type { Context } from '@temporalio/activity';
import type { Prisma } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import type { ActivityDeps } from '../deps.js';
import type { RunCommitter } from './commit.js';
import type { ThoughtLog } from './thoughts.js';

export type RunAgentOutcome =
  | { status: 'succeeded' }
  | { status: 'failed'; errorCode: string }
  | { status: 'stopped' }
  | { status: 'paused'; toolCallId: string; formId: string; formToken: string; expiresAt: string }
  /** The turn's preparation ran here (`prepare`) and an input guard answered it: no run. */
  | { status: 'answered_by_guard'; guard: 'moderation' | 'annotation' };

export interface RunScope {
  deps: ActivityDeps;
  ctx: Context;
  log: Logger;
  /** The message as this attempt found it (ids, owner, workflow; not its answer, which moves). */
  msg: Prisma.MessageModel;
  /** The run request row as built by prepareTurn (output moderation). */
  run: Prisma.AgentBackendRunModel;
  /** The binding whose session snapshot this run continues (none for a build without one). */
  bindingId: string | null;
  committer: RunCommitter;
  thoughts: ThoughtLog;
}
