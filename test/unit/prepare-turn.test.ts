/**
 * The turn's preparation (activities/prepare/index.ts) on a real PostgreSQL: a first turn's binding is one statement
 * (workspace, binding and the write-back to the conversation together), and every way of meeting an earlier
 * attempt's leftovers — a retry, a workspace an interrupted attempt left, two attempts at once — ends with one
 * workspace, one binding written back, one run row. The statements a first turn's preparation sends are counted:
 * the round trips are what the benchmark's first token pays for (bench/README.md).
 */
import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTurnPreparation } from '../../activities/prepare/index.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, poolOf, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { createAgentApp } from '../../core/domain/seed.js';
import { sessionScopeKey, workspaceIdFor } from '../../core/domain/turn/bindings.js';
import { freshDatabase } from '../support/db.js';
import { readTurnContextRow } from '../../core/platform/hot-sql.js';
import { Prisma } from '../../core/platform/db.js';

let db: Db;
let dbUrl: string;
let dbName: string;
let tenantId: string;
let app: Awaited<ReturnType<typeof createAgentApp>>;
let prepare: ReturnType<typeof createTurnPreparation>;

beforeAll(async () => {
  const url = await freshDatabase('prepare_turn');
  dbUrl = url;
  dbName = new URL(url).pathname.slice(1);
  db = createDb(url);
  tenantId = (await db.tenant.create({ data: { name: 'prep' } })).id;
  app = await createAgentApp(db, tenantId, { name: 'prep' });
  prepare = createTurnPreparation({
    db,
    config: loadConfig({}, {}),
    logger: createLogger('prepare-test', 'silent'),
    backend: {} as AgentBackendClient,
  });
});
afterAll(async () => db?.$disconnect());

/** A new conversation holding its first message's lock, as api/turns/start.ts leaves it. */
async function newTurn(): Promise<{ messageId: string; conversationId: string }> {
  const messageId = crypto.randomUUID();
  const conv = await db.conversation.create({
    data: { tenant_id: tenantId, app_id: app.appId, active_message_id: messageId, dialogue_count: 1 },
  });
  await db.message.create({
    data: {
      id: messageId,
      tenant_id: tenantId,
      app_id: app.appId,
      conversation_id: conv.id,
      query: 'hello',
      workflow_id: `agent-turn-${messageId}`,
    },
  });
  return { messageId, conversationId: conv.id };
}

async function rowsOf(conversationId: string, messageId: string) {
  const conv = await db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const bindings = await db.agentWorkspaceBinding.findMany({ where: { owner_type: 'CONVERSATION', owner_id: conversationId } });
  const workspaces = await db.agentWorkspace.findMany({ where: { id: { in: bindings.map((b) => b.workspace_id) } } });
  const runs = await db.agentBackendRun.findMany({ where: { message_id: messageId } });
  return { conv, bindings, workspaces, runs };
}

function expectOneOfEach(r: Awaited<ReturnType<typeof rowsOf>>) {
  expect(r.bindings).toHaveLength(1);
  expect(r.workspaces).toHaveLength(1);
  expect(r.runs).toHaveLength(1);
  expect(r.conv.agent_workspace_binding_id).toBe(r.bindings[0]!.id);
  expect(r.runs[0]!.binding_id).toBe(r.bindings[0]!.id);
  expect(r.bindings[0]!.workspace_id).toBe(r.workspaces[0]!.id);
}

/** Statements sent to this file's database by any pg client of this process while `fn` runs (other files' clients in
 * the same vitest process, which runs files without isolation, talk to their own databases and are not counted). */
async function countStatements(fn: () => Promise<unknown>): Promise<number> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let n = 0;
  proto.query = function (this: { database?: string }, ...args: unknown[]) {
    if (this.database === dbName) n += 1;
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return n;
}

describe('prepareTurn', () => {
  it("prepares a new conversation's first turn in a handful of statements, its binding in one", async () => {
    // The published version is read and parsed once per process: a first turn on it pays that read once.
    const warm = await newTurn();
    await prepare({ messageId: warm.messageId, runGuards: true });

    const { messageId, conversationId } = await newTurn();
    const n = await countStatements(() => prepare({ messageId, runGuards: true }));
    // The turn's rows in one statement (core/platform/hot-sql.ts; through Prisma: message, conversation, files, run
    // row, then agent and app, 8 in all); the binding statement; the run request statement.
    expect(n).toBeLessThanOrEqual(3);
    const r = await rowsOf(conversationId, messageId);
    expectOneOfEach(r);
    expect(r.bindings[0]!.agent_config_version_id).toBe(app.configVersionId);
    expect((await db.message.findUniqueOrThrow({ where: { id: messageId } })).agent_config_version_id).toBe(app.configVersionId);
  });

  it('a retried preparation finds what the first one wrote', async () => {
    const { messageId, conversationId } = await newTurn();
    const first = await prepare({ messageId, runGuards: true });
    const again = await prepare({ messageId, runGuards: true });
    expect(first.guard).toBeNull();
    expect(again.guard).toBeNull();
    if (first.guard === null && again.guard === null) expect(again.run.binding_id).toBe(first.run.binding_id);
    expectOneOfEach(await rowsOf(conversationId, messageId));
  });

  it('an attempt that stopped after creating the workspace: the next one binds that workspace', async () => {
    const { messageId, conversationId } = await newTurn();
    const msg = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    const agent = await db.agent.findUniqueOrThrow({ where: { app_id: app.appId } });
    const scopeKey = sessionScopeKey({
      tenantId,
      appId: app.appId,
      conversationId,
      agentId: agent.id,
      scopeId: app.configVersionId,
    });
    const workspaceId = workspaceIdFor(scopeKey);
    await db.agentWorkspace.create({
      data: { id: workspaceId, tenant_id: msg.tenant_id, agent_id: agent.id, backend_workspace_ref: workspaceId },
    });
    await prepare({ messageId, runGuards: true });
    const r = await rowsOf(conversationId, messageId);
    expectOneOfEach(r);
    expect(r.workspaces[0]!.id).toBe(workspaceId);
  });

  it('two attempts at once: one binding, one workspace, both on the same run row', async () => {
    const { messageId, conversationId } = await newTurn();
    const [a, b] = await Promise.all([prepare({ messageId, runGuards: true }), prepare({ messageId, runGuards: true })]);
    if (a.guard === null && b.guard === null) expect(a.run.binding_id).toBe(b.run.binding_id);
    expectOneOfEach(await rowsOf(conversationId, messageId));
  });

  it("reads a turn's rows in one statement, with the types and values Prisma reads them with", async () => {
    const { messageId, conversationId } = await newTurn();
    await prepare({ messageId, runGuards: true });
    // Every kind of column set: numerics, a bigint, optional timestamps, files, the binding's workspace.
    await db.message.update({
      where: { id: messageId },
      data: {
        total_price: new Prisma.Decimal('0.0012345'),
        answer_unit_price: new Prisma.Decimal('12.5'),
        queue_position: 9007199254740993n,
        rolled_back_at: new Date(),
      },
    });
    for (const name of ['b.txt', 'a.txt'])
      await db.messageFile.create({
        data: {
          message_id: messageId,
          type: 'document',
          transfer_method: 'remote_url',
          url: `https://example.com/${name}`,
          belongs_to: 'user',
        },
      });
    const conv = await db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
    const binding = await db.agentWorkspaceBinding.update({ where: { id: conv.agent_workspace_binding_id! }, data: { retired_at: null } });
    await db.agentWorkspace.update({ where: { id: binding.workspace_id }, data: { copied_bytes: 123n } });

    let hot: Awaited<ReturnType<typeof readTurnContextRow>> | undefined;
    expect(await countStatements(async () => (hot = await readTurnContextRow(db, messageId)))).toBe(1);
    const msg = await db.message.findUniqueOrThrow({
      where: { id: messageId },
      include: { conversation: true, files: { orderBy: [{ created_at: 'asc' }, { id: 'asc' }] } },
    });
    expect(hot!.msg).toEqual(msg);
    expect(hot!.msg.queue_position).toBe(9007199254740993n);
    expect(hot!.msg.total_price).toBeInstanceOf(Prisma.Decimal);
    expect(hot!.existingRun).toEqual(await db.agentBackendRun.findUnique({ where: { message_id: messageId } }));
    expect(hot!.agent).toEqual(await db.agent.findUnique({ where: { app_id: app.appId } }));
    expect(hot!.app).toEqual(await db.app.findUniqueOrThrow({ where: { id: app.appId } }));
    expect(hot!.conversationBinding).toEqual(
      await db.agentWorkspaceBinding.findUnique({ where: { id: binding.id }, include: { workspace: true } }),
    );
    expect(hot!.conversationBinding!.workspace.copied_bytes).toBe(123n);
  });

  it('reads the same rows unnamed with preparedStatements off (HOT_SQL_PREPARED=false, PgBouncer transaction mode)', async () => {
    const { messageId } = await newTurn();
    const names = async (d: Db) =>
      (await poolOf(d).pool.query<{ name: string }>('select name from pg_prepared_statements')).rows.map((r) => r.name);
    for (const preparedStatements of [true, false]) {
      // One connection, so the session that ran the read is the one asked.
      const one = createDb(dbUrl, { max: 1, preparedStatements });
      try {
        const row = await readTurnContextRow(one, messageId);
        expect(row.msg.id).toBe(messageId);
        expect(await names(one)).toEqual(preparedStatements ? ['hot_turn_context_v1'] : []);
      } finally {
        await one.$disconnect();
      }
    }
  });
});
