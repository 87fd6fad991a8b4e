/**
 * The conversation queue's two narrow windows (docs/ARCHITECTURE.md "Multitask strategies"), each reproduced
 * deterministically on the real stack by putting the system in the window and acting there:
 *
 * (a) a stop reaching a queued message after its claim and before its child turn exists: the stop's workflow cancel
 *     finds no workflow (the outbox counts it delivered). The window is held open here (the coordinator terminated
 *     after the claim committed); the next claim finds the cancel row and ends the message stopped instead of
 *     starting it. (A stop in the live window — claim recorded, start not yet issued — is caught by the coordinator's
 *     look-up right after the start, which cancels the child.)
 * (b) a turn's release racing a follow-up being queued: the release blocks on the conversation row the enqueue holds;
 *     it must hand the lock to that queued message once it commits (not free it: a `reject` request would then take
 *     the lock ahead of the queue).
 * (c) the releaseTurn activity (a failed, stopped or old-shape turn's end) racing a follow-up that takes the row right
 *     after the release's own row lock: the lock and the update must be one transaction, or the update's snapshot
 *     misses the queued message and frees the conversation with a message still queued.
 */
import crypto from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConversationQueueActivities } from '../../activities/conversation-queue.js';
import type { ActivityDeps } from '../../activities/deps.js';
import { createReleaseTurn } from '../../activities/turn-end.js';
import { releaseTurnLock, takeTurnLock } from '../../core/domain/turn/turn-lock.js';
import { queueBehindTurn, wakeConversationQueue } from '../../core/domain/turn/queue.js';
import { createLogger } from '../../core/platform/logger.js';
import { conversationQueueWorkflowId } from '../../core/protocol/workflow-contract.js';
import { workflowIdForMessage } from '../../workflows/definitions.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let key: string;
const logger = createLogger('multitask-races-test', 'warn');
const headers = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

beforeAll(async () => {
  stack = await startTestStack('multitask_races', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const end = Date.now() + ms; !(await cond());) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const stop = (taskId: string, user: string) =>
  fetch(`${stack.apiUrl}/v1/chat-messages/${taskId}/stop`, { method: 'POST', headers: headers(), body: JSON.stringify({ user }) });

describe('conversation queue races', () => {
  it('(a) a stop between the claim and the child start is not lost: the turn ends stopped', async () => {
    const user = 'stella';
    const first = await chat(stack.apiUrl, key, { query: 'Remember me.', user });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const running = await postChat(stack.apiUrl, key, { query: '/slow 100 /long 1800', user, conversation_id: conversationId });
    const runningReader = new FrameReader(running);
    const head = await runningReader.read((f) => f.event === 'agent_message');
    const a = head[0]!.data.task_id as string;
    const queued = await postChat(stack.apiUrl, key, {
      query: 'queued, then stopped',
      user,
      conversation_id: conversationId,
      multitask_strategy: 'enqueue',
    });
    expect(queued.status).toBe(200);
    const b = (await stack.db.message.findFirstOrThrow({ where: { conversation_id: conversationId, status: 'queued' } })).id;

    // The window, held open: no coordinator (terminated, as an operator may), A's end hands the lock to B, and B is
    // claimed — its activity's transaction, committed — with no child started.
    const coordinator = stack.temporal.workflow.getHandle(conversationQueueWorkflowId(conversationId));
    await until('the coordinator', async () => (await coordinator.describe().catch(() => null))?.status.name === 'RUNNING');
    await coordinator.terminate('test: hold the window between claim and start');
    expect(await (await stop(a, user)).json()).toEqual({ result: 'success' });
    await runningReader.read();
    await until(
      'the lock handed to B',
      async () => (await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id === b,
    );
    const activities = createConversationQueueActivities({ db: stack.db, config: stack.config, logger });
    const claimed = await new MockActivityEnvironment().run(activities.claimQueuedTurn, { conversationId });
    expect(claimed).toMatchObject({ kind: 'turn', input: { messageId: b } });
    expect((await stack.db.message.findUniqueOrThrow({ where: { id: b } })).status).toBe('pending');

    // The stop lands in the window: its cancel finds no workflow.
    expect(await (await stop(b, user)).json()).toEqual({ result: 'success' });
    const cancel = await stack.db.temporalOutbox.findFirstOrThrow({ where: { workflow_id: workflowIdForMessage(b), kind: 'cancel' } });
    expect(cancel.delivered_at).not.toBeNull();
    expect(cancel.last_error).not.toBeNull();

    // The coordinator comes back (as the sweeper or the next follow-up wakes it), claims B again and starts its turn.
    expect(
      await wakeConversationQueue(
        { temporal: stack.temporal, config: stack.config, logger },
        {
          conversationId,
          tenantId: stack.demo!.tenantId,
          appId: stack.demo!.appId,
        },
      ),
    ).toBe(true);
    const frames = await new FrameReader(queued).read();
    expect(frames.at(-1)!.event).toBe('message_end');
    const ended = await stack.db.message.findUniqueOrThrow({ where: { id: b } });
    expect(ended.status).toBe('stopped');
    // It never ran: no turn workflow, no backend run, and its end says stopped.
    await expect(stack.temporal.workflow.getHandle(workflowIdForMessage(b)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    expect(await stack.db.agentBackendRun.count({ where: { message_id: b } })).toBe(0);
    expect(frames.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
    expect(frames.map((f) => f.event)).not.toContain('agent_message');
    // The conversation is free again for the next message.
    await until(
      'the lock released',
      async () => (await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id === null,
    );
  }, 180_000);

  it('(b) a release blocked by a follow-up being queued hands the lock to it: a reject request cannot jump the queue', async () => {
    const user = 'rowan';
    const first = await chat(stack.apiUrl, key, { query: 'Hello.', user });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    const a = first.frames.at(-1)!.data.message_id as string;
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    // A's turn "still in flight" (it holds the lock) while a follow-up is queued behind it.
    await stack.db.conversation.update({ where: { id: conversationId }, data: { active_message_id: a } });
    const b = crypto.randomUUID();
    let commit!: () => void;
    const gate = new Promise<void>((r) => (commit = r));
    let queuedIn!: () => void;
    const inQueue = new Promise<void>((r) => (queuedIn = r));
    const enqueue = stack.db.$transaction(
      async (tx) => {
        const d = await queueBehindTurn(tx, {
          appId: conv.app_id,
          tenantId: conv.tenant_id,
          conversationId,
          messageId: b,
          workflowId: workflowIdForMessage(b),
          owner: { end_user_id: conv.end_user_id! },
          invokeFrom: 'service-api',
          query: 'queued while A ends',
          inputs: {},
          files: [],
          metadata: {},
          strategy: 'enqueue',
          limit: 10,
        });
        expect(d.kind).toBe('queued');
        queuedIn();
        await gate;
      },
      { timeout: 60_000 },
    );
    await inQueue;
    // A ends now: its release waits on the conversation row the enqueue holds.
    const release = stack.db.$transaction((tx) => releaseTurnLock(tx, conversationId, a), { timeout: 60_000 });
    await until('the release to wait on the row lock', async () => {
      const [w] = await stack.db.$queryRaw<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query ilike '%conversations%'`;
      return w!.n > 0;
    });
    commit();
    await enqueue;
    expect(await release).toBe(true);
    // Handed to the queued message, not freed: a plain (reject) request finds the conversation busy.
    expect((await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } })).active_message_id).toBe(b);
    expect(await takeTurnLock(stack.db, conversationId, crypto.randomUUID())).toBe(false);
    // Tidy: the queued message ends as a stop would (no coordinator was woken for it).
    expect(await (await stop(b, user)).json()).toEqual({ result: 'success' });
  }, 120_000);

  it('(c) the releaseTurn activity racing a follow-up that takes the row after its lock: the queued message gets the lock', async () => {
    const user = 'ciaran';
    const releaseTurn = createReleaseTurn({ db: stack.db, config: stack.config, logger } as unknown as ActivityDeps);
    const first = await chat(stack.apiUrl, key, { query: 'Hello.', user });
    const conversationId = first.frames.at(-1)!.data.conversation_id as string;
    let a = first.frames.at(-1)!.data.message_id as string;
    const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const lockWaiters = async () => {
      const [w] = await stack.db.$queryRaw<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query ilike '%conversations%'`;
      return w!.n;
    };
    // The interleaving depends on which waiter PostgreSQL wakes first; three rounds make the old code's loss (a free
    // conversation with a message queued) show in practically every run, and each round's outcome is checked whole.
    for (let round = 0; round < 3; round++) {
      await stack.db.conversation.update({ where: { id: conversationId }, data: { active_message_id: a } });
      // A third party holds the conversation row, so the release and then the enqueue queue up behind it.
      let unhold!: () => void;
      const held = new Promise<void>((r) => (unhold = r));
      let holding!: () => void;
      const isHeld = new Promise<void>((r) => (holding = r));
      const holder = stack.db.$transaction(
        async (tx) => {
          await tx.$queryRaw`select 1 from conversations where id = ${conversationId}::uuid for update`;
          holding();
          await held;
        },
        { timeout: 60_000 },
      );
      await isHeld;
      let released = false;
      const release = releaseTurn({ conversationId, messageId: a }).then(() => (released = true));
      await until('the release to wait on the row', async () => (await lockWaiters()) === 1);
      const b = crypto.randomUUID();
      let commit!: () => void;
      const gate = new Promise<void>((r) => (commit = r));
      let decided!: (kind: string) => void;
      const decision = new Promise<string>((r) => (decided = r));
      const enqueue = stack.db.$transaction(
        async (tx) => {
          const d = await queueBehindTurn(tx, {
            appId: conv.app_id,
            tenantId: conv.tenant_id,
            conversationId,
            messageId: b,
            workflowId: workflowIdForMessage(b),
            owner: { end_user_id: conv.end_user_id! },
            invokeFrom: 'service-api',
            query: `queued while A's release runs (round ${round})`,
            inputs: {},
            files: [],
            metadata: {},
            strategy: 'enqueue',
            limit: 10,
          });
          decided(d.kind);
          await gate;
        },
        { timeout: 60_000 },
      );
      await until('the enqueue to wait behind the release', async () => (await lockWaiters()) === 2);
      unhold();
      await holder;
      const kind = await decision;
      // The enqueue holds its transaction open: whatever of the release still runs waits on it, or is done.
      await until('the release to be done or waiting on the enqueue', async () => released || (await lockWaiters()) === 1);
      commit();
      await enqueue;
      await release;
      const after = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
      const queuedLeft = await stack.db.message.count({ where: { conversation_id: conversationId, status: 'queued' } });
      // Either order ends with B holding the conversation: queued and handed over, or the lock taken outright.
      expect({ round, kind, active: after.active_message_id, queuedLeft }).toEqual({
        round,
        kind,
        active: b,
        queuedLeft: kind === 'queued' ? 1 : 0,
      });
      expect(['queued', 'lock_taken']).toContain(kind);
      expect(await takeTurnLock(stack.db, conversationId, crypto.randomUUID())).toBe(false);
      // Tidy for the next round: B ends (no coordinator was woken for it) and becomes the turn that releases next.
      await stack.db.message.updateMany({ where: { id: b, status: 'queued' }, data: { status: 'stopped' } });
      a = b;
    }
  }, 180_000);
});
