/**
 * The turn's hot statements on node-postgres (issue 40 item 2), in one place. Through Prisma a turn's preparation read
 * its rows in two rounds of six or seven statements (an `include` is a statement per relation); each statement also
 * paid Prisma's query compilation and result mapping in the worker. Here each read is ONE named prepared statement
 * (parsed and planned once per connection) on the pool the Prisma client runs on (db.ts `poolOf`), and its rows come
 * back with Prisma's own types: every row is selected as `to_jsonb(row)` and decoded by the column types below, which
 * test/unit/hot-sql-types.test.ts checks against the Prisma schema (a new DateTime, Decimal or BigInt column fails it
 * until it is listed) and test/unit/prepare-turn.test.ts compares, row for row, with what Prisma reads.
 * HOT_SQL_PREPARED=false (createDb `preparedStatements`) sends the same text unnamed — parsed on every call, as
 * PgBouncer in transaction mode needs (docs/configuration.md).
 * The api's SSE readers (core/protocol/event-log.ts `followEvents`) read here too: every wake-up of every stream is a
 * read, the most frequent statement a turn makes.
 */
import type {
  Agent,
  AgentBackendRun,
  AgentWorkspace,
  AgentWorkspaceBinding,
  App,
  Conversation,
  Message,
  MessageFile,
} from '../generated/prisma/client.js';
import type pg from 'pg';
import { Prisma, poolOf, type Db } from './db.js';

/** The columns JSON cannot carry as Prisma types them: timestamps (Date), numeric (Decimal), bigint (BigInt). */
export interface ColumnTypes {
  DateTime: readonly string[];
  Decimal: readonly string[];
  BigInt: readonly string[];
}

/** Per Prisma model read here (field names are the column names: the schema maps none). */
export const HOT_MODELS = {
  Message: {
    DateTime: ['rolled_back_at', 'created_at', 'updated_at'],
    Decimal: ['message_unit_price', 'message_price_unit', 'answer_unit_price', 'answer_price_unit', 'total_price'],
    BigInt: ['queue_position'],
  },
  Conversation: { DateTime: ['created_at', 'updated_at', 'deleted_at'], Decimal: [], BigInt: [] },
  MessageFile: { DateTime: ['created_at'], Decimal: [], BigInt: [] },
  AgentBackendRun: { DateTime: ['created_at', 'updated_at'], Decimal: [], BigInt: [] },
  Agent: { DateTime: ['created_at', 'updated_at'], Decimal: [], BigInt: [] },
  App: { DateTime: ['created_at', 'updated_at'], Decimal: [], BigInt: [] },
  AgentWorkspaceBinding: { DateTime: ['retired_at', 'created_at', 'updated_at'], Decimal: [], BigInt: [] },
  AgentWorkspace: { DateTime: ['retired_at', 'created_at'], Decimal: [], BigInt: ['copied_bytes'] },
} as const satisfies Record<string, ColumnTypes>;

export type HotModel = keyof typeof HOT_MODELS;

/**
 * SQL for one row as JSON: numeric and bigint columns as text (a JSON number would lose digits), the rest as
 * to_jsonb makes them (timestamps as ISO strings, json as json).
 */
function rowJson(model: HotModel, alias: string): string {
  const t = HOT_MODELS[model];
  const exact = [...t.Decimal, ...t.BigInt];
  if (exact.length === 0) return `to_jsonb(${alias})`;
  return `(to_jsonb(${alias}) || jsonb_build_object(${exact.map((c) => `'${c}', ${alias}.${c}::text`).join(', ')}))`;
}

/** A row of `rowJson` with Prisma's types. */
export function decodeRow<T>(model: HotModel, json: Record<string, unknown>): T {
  const t = HOT_MODELS[model];
  const row: Record<string, unknown> = { ...json };
  for (const c of t.DateTime) if (row[c] != null) row[c] = new Date(row[c] as string);
  for (const c of t.Decimal) if (row[c] != null) row[c] = new Prisma.Decimal(row[c] as string);
  for (const c of t.BigInt) if (row[c] != null) row[c] = BigInt(row[c] as string);
  return row as T;
}

/** What a turn's steps read about its message (activities/prepare/turn-context.ts). */
export interface TurnContextRow {
  msg: Message & { conversation: Conversation; files: MessageFile[] };
  existingRun: AgentBackendRun | null;
  agent: Agent | null;
  /** Null only where the app row is gone: runAgent reads this for a run built by an earlier attempt, which needs none. */
  app: App | null;
  /** The conversation's binding with its workspace; null for a debugger turn (its session is the draft's). */
  conversationBinding: (AgentWorkspaceBinding & { workspace: AgentWorkspace }) | null;
}

/**
 * The message with its conversation and files, its run row, the app's agent, the app, and (not for a debugger turn)
 * the conversation's binding with its workspace: one round trip where Prisma made two rounds of six or seven.
 */
const TURN_CONTEXT = {
  name: 'hot_turn_context_v1',
  text: `
    select ${rowJson('Message', 'm')} as msg,
           ${rowJson('Conversation', 'c')} as conversation,
           coalesce((select jsonb_agg(${rowJson('MessageFile', 'f')} order by f.created_at, f.id)
                       from message_files f where f.message_id = m.id), '[]'::jsonb) as files,
           (select ${rowJson('AgentBackendRun', 'r')} from agent_backend_runs r where r.message_id = m.id) as run,
           (select ${rowJson('Agent', 'a')} from agents a where a.app_id = m.app_id) as agent,
           (select ${rowJson('App', 'p')} from apps p where p.id = m.app_id) as app,
           (select ${rowJson('AgentWorkspaceBinding', 'b')} || jsonb_build_object('workspace', ${rowJson('AgentWorkspace', 'w')})
              from agent_workspace_bindings b join agent_workspaces w on w.id = b.workspace_id
             where b.id = c.agent_workspace_binding_id and m.invoke_from <> 'debugger') as binding
      from messages m join conversations c on c.id = m.conversation_id
     where m.id = $1::uuid`,
};

type Json = Record<string, unknown>;

/** A stored client event as the stream writes it (message_events: seq, event, data). */
export interface EventRow {
  seq: number;
  event: string;
  data: unknown;
}

/**
 * A stream's read after its cursor: the next events in seq order, and — only when there are none — the seq of the
 * message's last terminal event, so a reader at or past the end knows it in the same round trip (and the same
 * snapshot) instead of a second statement. `$4`: the terminal event names (core/protocol/client-events.ts).
 */
const EVENTS_AFTER = {
  name: 'hot_events_after_v1',
  text: `
    with batch as (
      select seq, event, data from message_events
       where message_id = $1::uuid and seq > $2::int
       order by seq limit $3::int
    )
    select seq, event, data, null::int as terminal_seq from batch
    union all
    select null, null, null,
           (select t.seq from message_events t
             where t.message_id = $1::uuid and t.event = any($4::text[]) order by t.seq desc limit 1)
     where not exists (select 1 from batch)`,
};

/**
 * A new conversation's first turn, as the api's start transaction wrote it through Prisma in four statements (BEGIN,
 * the conversation, the message, COMMIT; one more for files): the conversation born holding the turn's lock, the
 * message at the thread's root, and its files — one statement, which is its own transaction. Foreign keys are checked
 * at the statement's end, so the rows may reference each other. Columns not listed take the schema's defaults, as
 * Prisma's create did (created_at/updated_at from the server's clock here).
 */
const START_NEW_CONVERSATION = {
  name: 'hot_start_new_conversation_v1',
  text: `
    with conv as (
      insert into conversations (id, tenant_id, app_id, end_user_id, account_id, name, inputs, invoke_from,
                                 active_message_id, dialogue_count)
      values ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::uuid, $6, $7::jsonb, $8, $9::uuid, $10::int)
      returning id
    ), msg as (
      insert into messages (id, parent_message_id, tenant_id, app_id, conversation_id, end_user_id, account_id,
                            invoke_from, api_token_id, query, inputs, workflow_id, metadata)
      select $9::uuid, $11::uuid, $2::uuid, $3::uuid, conv.id, $4::uuid, $5::uuid, $8, $12::uuid, $13, $7::jsonb, $14,
             $15::jsonb
        from conv
      returning id, created_at
    ), files as (
      insert into message_files (id, message_id, type, transfer_method, url, upload_file_id, belongs_to)
      select f.id, msg.id, f.type, f.transfer_method, f.url, f.upload_file_id, 'user'
        from msg cross join jsonb_to_recordset($16::jsonb) as f(id uuid, type text, transfer_method text, url text, upload_file_id uuid)
      returning 1
    )
    select msg.created_at, (select count(*) from files)::int as files from msg`,
};

/** What START_NEW_CONVERSATION writes (ids made by the caller, as Prisma made them client-side). */
export interface NewConversationTurn {
  conversation: {
    id: string;
    tenant_id: string;
    app_id: string;
    end_user_id: string | null;
    account_id: string | null;
    name: string;
    inputs: unknown;
    invoke_from: string;
    active_message_id: string;
    dialogue_count: number;
  };
  message: {
    id: string;
    parent_message_id: string;
    api_token_id: string | null;
    query: string;
    workflow_id: string;
    metadata: unknown;
  };
  files: { id: string; type: string; transfer_method: string; url: string | null; upload_file_id: string | null }[];
}

/**
 * A follow-up turn in a conversation that is free, as the start transaction wrote it through Prisma in six statements
 * (BEGIN, the conversation, its lock, the newest message, the message, COMMIT; one more for files): the conversation
 * found by its owner, its lock taken by the conditional update, the message after the newest one (the thread's
 * parent), its files. The lock is the update's row lock, taken before the insert's key-share lock on the same row (the
 * insert reads the update's output), as the transaction took them. Busy (the lock is held): nothing is written, and
 * the caller goes the transaction's way (409 or the conversation's queue).
 */
const START_FOLLOW_UP = {
  name: 'hot_start_follow_up_v1',
  text: `
    with conv as (
      select id from conversations
       where id = $1::uuid and app_id = $2::uuid and invoke_from = $5 and deleted_at is null
         and case when $3::uuid is not null then end_user_id = $3::uuid else account_id is not distinct from $4::uuid end
    ), lock as (
      update conversations c set active_message_id = $6::uuid, dialogue_count = c.dialogue_count + 1, updated_at = now()
       where c.id = (select id from conv) and c.active_message_id is null
      returning c.id, c.tenant_id
    ), newest as (
      select m.id from messages m where m.conversation_id = $1::uuid order by m.created_at desc, m.id desc limit 1
    ), msg as (
      insert into messages (id, parent_message_id, tenant_id, app_id, conversation_id, end_user_id, account_id,
                            invoke_from, api_token_id, query, inputs, workflow_id, metadata)
      select $6::uuid, coalesce((select id from newest), $7::uuid), $8::uuid, $2::uuid, lock.id, $3::uuid, $4::uuid, $5,
             $9::uuid, $10, $11::jsonb, $12, $13::jsonb
        from lock
      returning id, created_at
    ), files as (
      insert into message_files (id, message_id, type, transfer_method, url, upload_file_id, belongs_to)
      select f.id, msg.id, f.type, f.transfer_method, f.url, f.upload_file_id, 'user'
        from msg cross join jsonb_to_recordset($14::jsonb) as f(id uuid, type text, transfer_method text, url text, upload_file_id uuid)
      returning 1
    )
    select (select count(*) from conv)::int as found, (select created_at from msg) as created_at,
           (select count(*) from files)::int as files`,
};

/** What START_FOLLOW_UP writes: the message of NewConversationTurn, in an existing conversation. */
export interface FollowUpTurn {
  conversationId: string;
  tenantId: string;
  appId: string;
  endUserId: string | null;
  accountId: string | null;
  invokeFrom: string;
  /** The thread's root, when the conversation has no message yet. */
  rootParentId: string;
  message: NewConversationTurn['message'] & { id: string; inputs: unknown };
  files: NewConversationTurn['files'];
}

/** Runs a hot statement on the client's pool: named (prepared once per connection) unless the client says not to. */
async function hotQuery<R extends pg.QueryResultRow>(db: Db, q: { name: string; text: string }, values: unknown[]) {
  const { pool, prepared } = poolOf(db);
  return pool.query<R>(prepared ? { name: q.name, text: q.text, values } : { text: q.text, values });
}

export async function readTurnContextRow(db: Db, messageId: string): Promise<TurnContextRow> {
  const res = await hotQuery<{
    msg: Json;
    conversation: Json;
    files: Json[];
    run: Json | null;
    agent: Json | null;
    app: Json | null;
    binding: Json | null;
  }>(db, TURN_CONTEXT, [messageId]);
  const r = res.rows[0];
  if (!r) throw new Error(`message ${messageId} not found`);
  const msg = decodeRow<Message>('Message', r.msg);
  const binding = r.binding
    ? {
        ...decodeRow<AgentWorkspaceBinding>('AgentWorkspaceBinding', r.binding),
        workspace: decodeRow<AgentWorkspace>('AgentWorkspace', r.binding.workspace as Json),
      }
    : null;
  return {
    msg: {
      ...msg,
      conversation: decodeRow<Conversation>('Conversation', r.conversation),
      files: r.files.map((f) => decodeRow<MessageFile>('MessageFile', f)),
    },
    existingRun: r.run ? decodeRow<AgentBackendRun>('AgentBackendRun', r.run) : null,
    agent: r.agent ? decodeRow<Agent>('Agent', r.agent) : null,
    app: r.app ? decodeRow<App>('App', r.app) : null,
    conversationBinding: binding,
  };
}

/** The events of a message after `afterSeq` (at most `limit`); `terminalSeq` is read only when there are none. */
export async function readEventsAfter(
  db: Db,
  messageId: string,
  afterSeq: number,
  limit: number,
  terminalEvents: readonly string[],
): Promise<{ events: EventRow[]; terminalSeq: number | null }> {
  const res = await hotQuery<{ seq: number | null; event: string | null; data: unknown; terminal_seq: number | null }>(db, EVENTS_AFTER, [
    messageId,
    afterSeq,
    limit,
    terminalEvents,
  ]);
  const events: EventRow[] = [];
  let terminalSeq: number | null = null;
  for (const r of res.rows) {
    if (r.seq === null) terminalSeq = r.terminal_seq;
    else events.push({ seq: r.seq, event: r.event!, data: r.data });
  }
  // UNION ALL promises no order across its arms; within the batch it is the read's (seq), kept by sorting.
  events.sort((a, b) => a.seq - b.seq);
  return { events, terminalSeq };
}

/** Writes a new conversation's first turn in one statement; returns the message's created_at. */
export async function insertNewConversationTurn(db: Db, t: NewConversationTurn): Promise<Date> {
  const c = t.conversation;
  const m = t.message;
  const res = await hotQuery<{ created_at: Date; files: number }>(db, START_NEW_CONVERSATION, [
    c.id,
    c.tenant_id,
    c.app_id,
    c.end_user_id,
    c.account_id,
    c.name,
    JSON.stringify(c.inputs),
    c.invoke_from,
    c.active_message_id,
    c.dialogue_count,
    m.parent_message_id,
    m.api_token_id,
    m.query,
    m.workflow_id,
    JSON.stringify(m.metadata),
    JSON.stringify(t.files),
  ]);
  const r = res.rows[0];
  if (!r || r.files !== t.files.length) throw new Error(`new conversation ${c.id}: the turn's rows were not all written`);
  return r.created_at;
}

/**
 * Writes a follow-up turn in one statement when its conversation is free. `found` false: no such conversation of this
 * owner (404); `createdAt` null: it is busy, nothing was written.
 */
export async function insertFollowUpTurn(db: Db, t: FollowUpTurn): Promise<{ found: boolean; createdAt: Date | null }> {
  const m = t.message;
  const res = await hotQuery<{ found: number; created_at: Date | null; files: number }>(db, START_FOLLOW_UP, [
    t.conversationId,
    t.appId,
    t.endUserId,
    t.accountId,
    t.invokeFrom,
    m.id,
    t.rootParentId,
    t.tenantId,
    m.api_token_id,
    m.query,
    JSON.stringify(m.inputs),
    m.workflow_id,
    JSON.stringify(m.metadata),
    JSON.stringify(t.files),
  ]);
  const r = res.rows[0]!;
  if (r.created_at && r.files !== t.files.length) throw new Error(`message ${m.id}: the turn's rows were not all written`);
  return { found: r.found > 0, createdAt: r.created_at };
}
