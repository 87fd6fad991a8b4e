/**
 * The turn sweeper (worker/sweeper.ts, issue 30) over a real PostgreSQL with a scripted Temporal: what it ends, what it
 * leaves alone (a workflow still running, a message inside the grace, a paused turn's lock), and what it records.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { TurnSweeper } from '../../worker/sweeper.js';
import { freshDatabase } from '../support/db.js';
import { preparedTurn } from './run-agent-harness.js';

let db: Db;
const logger = createLogger('turn-sweeper', 'silent');
/** Workflow ids Temporal knows, with their status; any other id is not found. */
const workflows = new Map<string, string>();
const temporal = {
  workflow: {
    getHandle: (id: string) => ({
      describe: async () => {
        const status = workflows.get(id);
        if (!status) throw new WorkflowNotFoundError('not found', id, undefined);
        return { status: { name: status } };
      },
    }),
  },
} as unknown as Client;
const sweeper = () => new TurnSweeper({ db, temporal: () => temporal, logger, graceMs: 1_000 });

beforeAll(async () => {
  db = createDb(await freshDatabase('turn_sweeper'));
});
afterAll(async () => {
  await db?.$disconnect();
});

async function age(messageId: string, seconds = 5): Promise<void> {
  await db.$executeRaw`update messages set updated_at = now() - make_interval(secs => ${seconds}::float8) where id = ${messageId}::uuid`;
}

const state = async (messageId: string, conversationId: string) => {
  const m = await db.message.findUniqueOrThrow({ where: { id: messageId } });
  const c = await db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const events = await db.messageEvent.findMany({ where: { message_id: messageId }, orderBy: { seq: 'asc' } });
  return { status: m.status, code: m.error_code, lock: c.active_message_id, events: events.map((e) => e.event), metadata: m.metadata };
};

describe('turn sweeper', () => {
  it('ends a pending message whose workflow never started: failed, error event, lock released, recorded', async () => {
    const { messageId, conversationId } = await preparedTurn(db);
    await age(messageId);
    const r = await sweeper().sweep();
    expect(r.failed).toContain(messageId);
    const s = await state(messageId, conversationId);
    expect(s).toMatchObject({ status: 'failed', code: 'temporal_unavailable', lock: null, events: ['error'] });
    expect(s.metadata).toMatchObject({ swept: { reason: 'temporal_unavailable' } });
    // A second pass (another worker) changes nothing.
    expect((await sweeper().sweep()).failed).not.toContain(messageId);
    expect((await state(messageId, conversationId)).events).toEqual(['error']);
  });

  it('ends a running message whose workflow closed without ending it (terminated)', async () => {
    const { messageId, conversationId } = await preparedTurn(db);
    await db.message.update({ where: { id: messageId }, data: { status: 'running' } });
    workflows.set(`turn-${messageId}`, 'TERMINATED');
    await age(messageId);
    await sweeper().sweep();
    expect(await state(messageId, conversationId)).toMatchObject({ status: 'failed', code: 'internal_server_error', lock: null });
  });

  it('leaves a message alone while its workflow runs, or while it is inside the grace', async () => {
    const running = await preparedTurn(db);
    workflows.set(`turn-${running.messageId}`, 'RUNNING');
    await age(running.messageId);
    const fresh = await preparedTurn(db);
    await sweeper().sweep();
    expect(await state(running.messageId, running.conversationId)).toMatchObject({
      status: 'pending',
      lock: running.messageId,
      events: [],
    });
    expect(await state(fresh.messageId, fresh.conversationId)).toMatchObject({ status: 'pending', lock: fresh.messageId, events: [] });
  });

  it("frees a lock held by a message that already ended, and keeps a paused turn's lock", async () => {
    const ended = await preparedTurn(db);
    await db.message.update({ where: { id: ended.messageId }, data: { status: 'succeeded' } });
    await age(ended.messageId);
    const paused = await preparedTurn(db);
    await db.message.update({ where: { id: paused.messageId }, data: { status: 'paused' } });
    await age(paused.messageId);
    const r = await sweeper().sweep();
    expect(r.released).toContain(ended.conversationId);
    const s = await state(ended.messageId, ended.conversationId);
    expect(s).toMatchObject({ status: 'succeeded', lock: null });
    expect(s.metadata).toHaveProperty('lock_released_by_sweeper_at');
    expect((await state(paused.messageId, paused.conversationId)).lock).toBe(paused.messageId);
  });
});
