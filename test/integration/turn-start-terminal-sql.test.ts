/**
 * The turn's start and terminal writes off the ORM (issue 40 item 2), on a real PostgreSQL: a new conversation's first
 * turn is one statement (core/platform/hot-sql.ts) and the terminal's session snapshot one statement for the binding and
 * the message (core/domain/session-snapshots.ts). Each writes the rows the ORM version wrote — the ORM version is
 * spelt out here, as the code had it — and the statements are counted on the client that sends them.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTurnRecords } from '../../api/turns/start.js';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db, type Prisma } from '../../core/platform/db.js';
import { insertFollowUpTurn, insertNewConversationTurn } from '../../core/platform/hot-sql.js';
import { ensureDemoData, type DemoData } from '../../core/domain/seed.js';
import { saveMessageSnapshot } from '../../core/domain/session-snapshots.js';
import { UUID_NIL } from '../../core/domain/message-thread.js';
import { heldByFirstTurn, takeTurnLock } from '../../core/domain/turn/turn-lock.js';
import { placeInThread } from '../../core/domain/turn/threads.js';
import { conversationTitle } from '../../core/domain/turn-text.js';
import type { AppContext } from '../../api/auth.js';
import type { ChatRequest } from '../../api/schemas.js';
import type { SessionSnapshot } from '../../core/protocol/run.js';
import { freshDatabase } from '../support/db.js';
import { countingDb, type CountingDb } from '../support/statements.js';

let db: Db;
let counted: CountingDb;
let demo: DemoData;
let app: AppContext;
const config = loadConfig({}, {});

beforeAll(async () => {
  const url = await freshDatabase('turn_start_terminal_sql');
  db = createDb(url, { max: 4 });
  demo = await ensureDemoData(db, { dataDir: path.join(os.tmpdir(), `turn-start-terminal-sql-${process.pid}`) });
  counted = countingDb(url, { max: 1 });
  const apiToken = await db.apiToken.findFirstOrThrow({ where: { app_id: demo.appId } });
  app = { tenantId: demo.tenantId, appId: demo.appId, agentId: demo.agentId, appName: 'Demo Agent', apiTokenId: apiToken.id };
});
afterAll(async () => {
  await counted?.db.$disconnect();
  await db?.$disconnect();
});

/** A row without what differs by construction between two writes of the same turn (ids, clocks). */
function comparable(row: Record<string, unknown>, ids: Record<string, string>) {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (k === 'created_at' || k === 'updated_at') out[k] = v instanceof Date ? 'a time' : v;
    else out[k] = typeof v === 'string' && ids[v] ? ids[v] : v;
  }
  return out;
}

/** The rows of a turn (conversation, message, files), ids replaced by their role. */
async function turnRows(conversationId: string, messageId: string) {
  const conversation = await db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const message = await db.message.findUniqueOrThrow({ where: { id: messageId } });
  const files = await db.messageFile.findMany({ where: { message_id: messageId }, orderBy: { url: 'asc' } });
  const ids: Record<string, string> = {
    [conversationId]: '<conversation>',
    [messageId]: '<message>',
    [`agent-turn-${messageId}`]: '<workflow>',
  };
  for (const f of files) ids[f.id] = `<file ${f.url}>`;
  return {
    conversation: comparable(conversation, ids),
    message: comparable(message, ids),
    files: files.map((f) => comparable(f, ids)),
  };
}

/** api/turns/start.ts's transaction for a new conversation as it was on the ORM (before hot-sql's one statement). */
async function ormNewConversationTurn(t: Parameters<typeof insertNewConversationTurn>[1]): Promise<void> {
  await db.$transaction(async (tx) => {
    const { id, ...conv } = t.conversation;
    await tx.conversation.create({ data: { id, ...conv, inputs: conv.inputs as object } });
    await tx.message.create({
      data: {
        ...t.message,
        tenant_id: conv.tenant_id,
        app_id: conv.app_id,
        conversation_id: id,
        end_user_id: conv.end_user_id,
        account_id: conv.account_id,
        invoke_from: conv.invoke_from,
        inputs: conv.inputs as object,
        metadata: t.message.metadata as object,
      },
    });
    if (t.files.length)
      await tx.messageFile.createMany({
        data: t.files.map(({ id: _id, ...f }) => ({ message_id: t.message.id, belongs_to: 'user', ...f })),
      });
  });
}

function newTurn(over: { endUserId?: string | null; accountId?: string | null; files?: number; query?: string } = {}) {
  const messageId = crypto.randomUUID();
  const query = over.query ?? 'What is 6 × 7? "quoted" é😀';
  return {
    conversation: {
      id: crypto.randomUUID(),
      tenant_id: demo.tenantId,
      app_id: demo.appId,
      end_user_id: over.endUserId ?? null,
      account_id: over.accountId ?? null,
      name: conversationTitle(query),
      inputs: { name: 'Ada', nested: { n: [1, 2.5, null], s: 'x' } },
      invoke_from: over.accountId ? 'debugger' : 'service-api',
      ...heldByFirstTurn(messageId),
    },
    message: {
      id: messageId,
      parent_message_id: UUID_NIL,
      api_token_id: null,
      query,
      workflow_id: `agent-turn-${messageId}`,
      metadata: { source: 'test', draft_type: 'DRAFT' },
    },
    files: Array.from({ length: over.files ?? 0 }, (_, i) => ({
      id: crypto.randomUUID(),
      type: 'document',
      transfer_method: 'remote_url',
      url: `https://example.com/f${i}.txt`,
      upload_file_id: null,
    })),
  };
}

describe("a new conversation's first turn", () => {
  it('is one statement writing the rows the ORM transaction wrote, files included', async () => {
    const endUser = await db.endUser.create({ data: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'u-rows' } });
    for (const over of [{ endUserId: endUser.id, files: 2 }, { accountId: demo.accountId }, { endUserId: endUser.id, files: 0 }]) {
      const hot = newTurn(over);
      const orm = newTurn(over);
      let created: Date | undefined;
      expect(await counted.count(async () => (created = await insertNewConversationTurn(counted.db, hot)))).toBe(1);
      await ormNewConversationTurn(orm);
      const [a, b] = [await turnRows(hot.conversation.id, hot.message.id), await turnRows(orm.conversation.id, orm.message.id)];
      expect(a).toEqual(b);
      expect(a.files).toHaveLength(over.files ?? 0);
      expect(a.conversation).toMatchObject({ active_message_id: '<message>', dialogue_count: 1, status: 'normal' });
      expect(a.message).toMatchObject({ status: 'pending', parent_message_id: UUID_NIL, workflow_id: '<workflow>', event_seq: 0 });
      const msg = await db.message.findUniqueOrThrow({ where: { id: hot.message.id } });
      expect(created).toEqual(msg.created_at);
    }
  });

  it('createTurnRecords writes it in one statement after admission and the end user (the ORM transaction: four)', async () => {
    const body = {
      query: 'hello there',
      inputs: { topic: 'x' },
      user: 'u-records',
      response_mode: 'streaming',
      auto_generate_name: true,
      files: [],
    } as unknown as ChatRequest;
    // A returning end user: one read beside admission's count.
    await createTurnRecords({ db: counted.db, config }, app, body, 'service-api', { kind: 'end-user' });
    let records: Awaited<ReturnType<typeof createTurnRecords>> | undefined;
    const n = await counted.count(
      async () =>
        (records = await createTurnRecords(
          { db: counted.db, config },
          app,
          body,
          'service-api',
          { kind: 'end-user' },
          { metadata: { k: 'v' } },
        )),
    );
    // admission's count, the end user, the turn's rows.
    expect(n).toBe(3);
    const conv = await db.conversation.findUniqueOrThrow({ where: { id: records!.conversationId } });
    const msg = await db.message.findUniqueOrThrow({ where: { id: records!.messageId } });
    const endUser = await db.endUser.findUniqueOrThrow({ where: { app_id_session_id: { app_id: demo.appId, session_id: 'u-records' } } });
    expect(conv).toMatchObject({
      end_user_id: endUser.id,
      account_id: null,
      name: conversationTitle('hello there'),
      inputs: { topic: 'x' },
      active_message_id: msg.id,
      dialogue_count: 1,
    });
    expect(msg).toMatchObject({
      conversation_id: conv.id,
      end_user_id: endUser.id,
      api_token_id: app.apiTokenId,
      parent_message_id: UUID_NIL,
      metadata: { k: 'v' },
      workflow_id: records!.workflowId,
      status: 'pending',
    });
    expect(records!.createdAt).toBe(Math.floor(msg.created_at.getTime() / 1000));
    // A parent in a conversation that does not exist yet is refused before anything is written, as before.
    const before = await db.message.count();
    await expect(
      createTurnRecords({ db: counted.db, config }, app, { ...body, parent_message_id: crypto.randomUUID() }, 'service-api', {
        kind: 'end-user',
      }),
    ).rejects.toMatchObject({ status: 404 });
    expect(await db.message.count()).toBe(before);
  });
});

describe('a follow-up turn in a free conversation', () => {
  /** A conversation with one ended turn, free again, of `endUserId`. */
  async function freeConversation(endUserId: string) {
    const first = newTurn({ endUserId });
    await insertNewConversationTurn(db, first);
    await db.conversation.update({ where: { id: first.conversation.id }, data: { active_message_id: null } });
    return first;
  }
  function followUp(first: ReturnType<typeof newTurn>, files = 0) {
    const messageId = crypto.randomUUID();
    return {
      conversationId: first.conversation.id,
      tenantId: demo.tenantId,
      appId: demo.appId,
      endUserId: first.conversation.end_user_id,
      accountId: null,
      invokeFrom: 'service-api',
      rootParentId: UUID_NIL,
      message: {
        id: messageId,
        parent_message_id: UUID_NIL,
        api_token_id: app.apiTokenId!,
        query: 'and then? é😀',
        inputs: { again: true },
        workflow_id: `agent-turn-${messageId}`,
        metadata: { k: 'v' },
      },
      files: newTurn({ files }).files,
    };
  }
  /** api/turns/start.ts's transaction for a free conversation as it was on the ORM. */
  async function ormFollowUp(t: ReturnType<typeof followUp>) {
    await db.$transaction(async (tx) => {
      const conv = await tx.conversation.findFirst({
        where: { id: t.conversationId, app_id: t.appId, end_user_id: t.endUserId, invoke_from: t.invokeFrom, deleted_at: null },
      });
      expect(conv).not.toBeNull();
      expect(await takeTurnLock(tx, t.conversationId, t.message.id)).toBe(true);
      const parent = await placeInThread(tx, { conversationId: t.conversationId, isNew: false, requested: undefined });
      const { parent_message_id: _p, ...m } = t.message;
      await tx.message.create({
        data: {
          ...m,
          parent_message_id: parent,
          tenant_id: t.tenantId,
          app_id: t.appId,
          conversation_id: t.conversationId,
          end_user_id: t.endUserId,
          account_id: t.accountId,
          invoke_from: t.invokeFrom,
          inputs: m.inputs as object,
          metadata: m.metadata as object,
        },
      });
      if (t.files.length)
        await tx.messageFile.createMany({
          data: t.files.map(({ id: _id, ...f }) => ({ message_id: t.message.id, belongs_to: 'user', ...f })),
        });
    });
  }

  it('is one statement writing the rows the ORM transaction wrote, its parent the newest message', async () => {
    const endUser = await db.endUser.create({ data: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'u-follow' } });
    for (const files of [2, 0]) {
      const [a, b] = [await freeConversation(endUser.id), await freeConversation(endUser.id)];
      // A second message in each, so that the parent is the newest of two (each way wrote its own).
      const [hot0, orm0] = [followUp(a), followUp(b)];
      await insertFollowUpTurn(db, hot0);
      await ormFollowUp(orm0);
      for (const id of [a.conversation.id, b.conversation.id])
        await db.conversation.update({ where: { id }, data: { active_message_id: null } });
      const hot = followUp(a, files);
      const orm = followUp(b, files);
      let r: Awaited<ReturnType<typeof insertFollowUpTurn>> | undefined;
      expect(await counted.count(async () => (r = await insertFollowUpTurn(counted.db, hot)))).toBe(1);
      expect(r).toMatchObject({ found: true, createdAt: expect.any(Date) });
      await ormFollowUp(orm);
      const rows = async (previous: ReturnType<typeof followUp>, t: ReturnType<typeof followUp>) => {
        const x = await turnRows(t.conversationId, t.message.id);
        const prev = { [previous.message.id]: '<previous message>' };
        return { ...x, conversation: comparable(x.conversation, prev), message: comparable(x.message, prev) };
      };
      const [ha, ob] = [await rows(hot0, hot), await rows(orm0, orm)];
      expect(ha).toEqual(ob);
      expect(ha.conversation).toMatchObject({ active_message_id: '<message>', dialogue_count: 3 });
      expect(ha.message).toMatchObject({ parent_message_id: '<previous message>', api_token_id: app.apiTokenId, status: 'pending' });
      expect(ha.files).toHaveLength(files);
    }
  });

  it('busy: writes nothing (the transaction then answers 409); not its owner: not found', async () => {
    const endUser = await db.endUser.create({ data: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'u-busy' } });
    const other = await db.endUser.create({ data: { tenant_id: demo.tenantId, app_id: demo.appId, session_id: 'u-other' } });
    const first = await freeConversation(endUser.id);
    expect((await insertFollowUpTurn(db, followUp(first))).createdAt).not.toBeNull();
    const before = await db.message.count({ where: { conversation_id: first.conversation.id } });
    expect(await insertFollowUpTurn(db, followUp(first, 1))).toEqual({ found: true, createdAt: null });
    expect(await insertFollowUpTurn(db, { ...followUp(first), endUserId: other.id })).toEqual({ found: false, createdAt: null });
    expect(await db.message.count({ where: { conversation_id: first.conversation.id } })).toBe(before);
    const conv = await db.conversation.findUniqueOrThrow({ where: { id: first.conversation.id } });
    expect(conv.dialogue_count).toBe(2);
    // Through createTurnRecords: the chat request's 409 and 404, as before.
    const body = { query: 'q', inputs: {}, user: 'u-busy', response_mode: 'streaming', conversation_id: first.conversation.id, files: [] };
    await expect(
      createTurnRecords({ db, config }, app, body as unknown as ChatRequest, 'service-api', { kind: 'end-user' }),
    ).rejects.toMatchObject({ status: 409, code: 'conversation_busy' });
    await expect(
      createTurnRecords({ db, config }, app, { ...body, user: 'u-other' } as unknown as ChatRequest, 'service-api', { kind: 'end-user' }),
    ).rejects.toMatchObject({ status: 404, code: 'conversation_not_exists' });
    // Free again: createTurnRecords takes it in one statement after admission and the end user.
    await db.conversation.update({ where: { id: first.conversation.id }, data: { active_message_id: null } });
    await createTurnRecords({ db: counted.db, config }, app, { ...body, query: 'warm' } as unknown as ChatRequest, 'service-api', {
      kind: 'end-user',
    }).then(() => db.conversation.update({ where: { id: first.conversation.id }, data: { active_message_id: null } }));
    expect(
      await counted.count(() =>
        createTurnRecords({ db: counted.db, config }, app, body as unknown as ChatRequest, 'service-api', { kind: 'end-user' }),
      ),
    ).toBe(3);
  });
});

describe("the terminal's session snapshot", () => {
  async function boundMessage() {
    const turn = newTurn();
    await insertNewConversationTurn(db, turn);
    const ws = await db.agentWorkspace.create({
      data: { tenant_id: demo.tenantId, agent_id: demo.agentId, backend_workspace_ref: crypto.randomUUID() },
    });
    const binding = await db.agentWorkspaceBinding.create({
      data: {
        tenant_id: demo.tenantId,
        app_id: demo.appId,
        agent_id: demo.agentId,
        workspace_id: ws.id,
        owner_type: 'CONVERSATION',
        owner_id: turn.conversation.id,
        scope_key: crypto.randomUUID(),
        session_scope_config_version_id: demo.configVersionId,
        config_kind: 'published',
        home_snapshot_id: 'home-v1',
        backend_binding_ref: ws.id,
      },
    });
    return {
      messageId: turn.message.id,
      conversationId: turn.conversation.id,
      bindingId: binding.id,
      bindingUpdatedAt: binding.updated_at,
    };
  }
  const snapshot = { version: 1, messages: [{ role: 'user', parts: ['é😀', { n: 2.5 }] }] } as unknown as SessionSnapshot;

  it("is one statement for the binding's session and the message's, the rows the two statements wrote", async () => {
    const [hot, orm] = [await boundMessage(), await boundMessage()];
    const save = (tx: Prisma.TransactionClient, m: typeof hot, asBindingSession: boolean) =>
      saveMessageSnapshot(tx, { ...m, snapshot, pendingToolCallId: 'call-1', perBranch: 20, asBindingSession });
    const n = await counted.count(() => counted.db.$transaction((tx) => save(tx, hot, true)));
    // BEGIN, the statement, COMMIT.
    expect(n).toBe(3);
    // As activities/run-agent/usage.ts wrote it before: the binding by Prisma, then the message's row.
    await db.$transaction(async (tx) => {
      await tx.agentWorkspaceBinding.update({
        where: { id: orm.bindingId },
        data: { session_snapshot: snapshot as unknown as Prisma.InputJsonValue },
      });
      await save(tx, orm, false);
    });
    const rows = async (m: typeof hot) => {
      const ids = { [m.messageId]: '<message>', [m.conversationId]: '<conversation>', [m.bindingId]: '<binding>' };
      const b = await db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: m.bindingId } });
      const s = await db.messageSessionSnapshot.findUniqueOrThrow({ where: { message_id: m.messageId } });
      expect(b.updated_at.getTime()).toBeGreaterThanOrEqual(m.bindingUpdatedAt.getTime());
      return {
        binding: { session_snapshot: b.session_snapshot, retired_at: b.retired_at },
        snapshot: comparable(s, ids),
      };
    };
    const [a, b] = [await rows(hot), await rows(orm)];
    expect(a).toEqual(b);
    expect(a.binding.session_snapshot).toEqual(snapshot);
    expect(a.snapshot).toMatchObject({ binding_id: '<binding>', pending_tool_call_id: 'call-1', snapshot });
  });

  it("fails (and rolls back the terminal) when the binding is gone, as Prisma's update did", async () => {
    const m = await boundMessage();
    await db.agentWorkspaceBinding.delete({ where: { id: m.bindingId } });
    await expect(
      db.$transaction((tx) => saveMessageSnapshot(tx, { ...m, snapshot, perBranch: 20, asBindingSession: true })),
    ).rejects.toThrow();
    expect(await db.messageSessionSnapshot.findUnique({ where: { message_id: m.messageId } })).toBeNull();
  });
});
