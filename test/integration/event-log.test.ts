/**
 * The client event log's append on real PostgreSQL: dense per-message seq across batches and concurrent
 * writers, order kept within a batch, duplicates (by source key) skipped without consuming a seq. And its read by the
 * api's streams (one prepared statement per wake-up, core/platform/hot-sql.ts): the rows Prisma reads.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../core/platform/db.js';
import {
  appendEvents,
  commitAnswerText,
  commitAnswerTexts,
  EventNotifier,
  followEvents,
  readEvents,
} from '../../core/protocol/event-log.js';
import { TERMINAL_CLIENT_EVENTS, type NewClientEvent, type StoredClientEvent } from '../../core/protocol/client-events.js';
import { poolOf } from '../../core/platform/db.js';
import { readEventsAfter } from '../../core/platform/hot-sql.js';
import { countingDb } from '../support/statements.js';
import { ensureDemoData, type DemoData } from '../../core/domain/seed.js';
import { freshDatabase } from '../support/db.js';

let db: Db;
let dbUrl: string;
let demo: DemoData;

beforeAll(async () => {
  dbUrl = await freshDatabase('event_log');
  db = createDb(dbUrl, { max: 10 });
  demo = await ensureDemoData(db, { dataDir: path.join(os.tmpdir(), `event-log-${process.pid}`) });
});
afterAll(async () => {
  await db?.$disconnect();
});

async function newMessage(): Promise<string> {
  const conv = await db.conversation.create({ data: { tenant_id: demo.tenantId, app_id: demo.appId } });
  const id = crypto.randomUUID();
  await db.message.create({
    data: { id, tenant_id: demo.tenantId, app_id: demo.appId, conversation_id: conv.id, query: 'q', workflow_id: `wf-${id}` },
  });
  return id;
}

const base = { conversation_id: crypto.randomUUID(), message_id: crypto.randomUUID(), task_id: crypto.randomUUID(), created_at: 0 };
const ev = (key: string, n = 0): NewClientEvent => ({
  event: 'agent_message',
  sourceKey: key,
  data: { ...base, event: 'agent_message', id: base.message_id, answer: `${key}#${n}` },
});
const answerOf = (r: StoredClientEvent): string | null => (r.event === 'agent_message' ? r.data.answer : null);

describe('appendEvents', () => {
  it('numbers events densely in batch order and skips duplicates without using a seq', async () => {
    const id = await newMessage();
    expect(await db.$transaction((tx) => appendEvents(tx, id, [ev('b'), ev('a'), ev('c')]))).toBe(3);
    // a replayed key (also duplicated inside the batch) is stored once; new keys follow densely
    expect(await db.$transaction((tx) => appendEvents(tx, id, [ev('a', 1), ev('d'), ev('d', 1), ev('e')]))).toBe(2);
    expect(await db.$transaction((tx) => appendEvents(tx, id, []))).toBe(0);
    const rows = await readEvents(db, id, 0);
    expect(rows.map((r) => [r.seq, answerOf(r)])).toEqual([
      [1, 'b#0'],
      [2, 'a#0'],
      [3, 'c#0'],
      [4, 'd#0'],
      [5, 'e#0'],
    ]);
  });

  it('keeps seq dense and unique under concurrent writers of one message', async () => {
    const id = await newMessage();
    const writers = Array.from({ length: 8 }, (_, w) =>
      (async () => {
        for (let b = 0; b < 5; b++) await db.$transaction((tx) => appendEvents(tx, id, [ev(`w${w}-b${b}-x`), ev(`w${w}-b${b}-y`)]));
      })(),
    );
    await Promise.all(writers);
    const rows = await readEvents(db, id, 0);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
    // each batch's two events stay adjacent and in order
    for (const r of rows.filter((x) => String(answerOf(x)).includes('-x#'))) {
      const next = rows.find((x) => x.seq === r.seq + 1)!;
      expect(String(answerOf(next))).toBe(String(answerOf(r)).replace('-x#', '-y#'));
    }
  });

  it('rolls back with the caller’s transaction', async () => {
    const id = await newMessage();
    await expect(
      db.$transaction(async (tx) => {
        await appendEvents(tx, id, [ev('gone')]);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await db.$transaction((tx) => appendEvents(tx, id, [ev('kept')]));
    expect((await readEvents(db, id, 0)).map((r) => [r.seq, answerOf(r)])).toEqual([[1, 'kept#0']]);
  });

  it('commits streamed answer text with the cursor compare-and-set, or writes nothing when fenced out', async () => {
    const id = await newMessage();
    await db.agentBackendRun.create({ data: { message_id: id, request: {} } });
    await db.$transaction((tx) => appendEvents(tx, id, [ev('thought')]));
    const text = (t: string, key: string): NewClientEvent => ({
      event: 'agent_message',
      sourceKey: key,
      data: { ...base, event: 'agent_message', id: base.message_id, answer: t },
    });
    expect(
      await commitAnswerText(db, { messageId: id, expectedCursor: null, newCursor: '5', text: 'Hel', event: text('Hel', 'be:5') }),
    ).toBe(true);
    expect(await commitAnswerText(db, { messageId: id, expectedCursor: '5', newCursor: '9', text: 'lo', event: text('lo', 'be:9') })).toBe(
      true,
    );
    // a stale attempt (expects cursor 5, it is 9): nothing written
    expect(
      await commitAnswerText(db, { messageId: id, expectedCursor: '5', newCursor: '12', text: 'XX', event: text('XX', 'be:12') }),
    ).toBe(false);
    await db.$transaction((tx) => appendEvents(tx, id, [ev('end')]));
    const msg = await db.message.findUniqueOrThrow({ where: { id }, include: { agent_run: true } });
    expect(msg.answer).toBe('Hello');
    expect(msg.agent_run!.cursor).toBe('9');
    expect((await readEvents(db, id, 0)).map((r) => [r.seq, answerOf(r)])).toEqual([
      [1, 'thought#0'],
      [2, 'Hel'],
      [3, 'lo'],
      [4, 'end#0'],
    ]);
  });

  it('commits the text of several messages in one statement, each under its own compare-and-set (group commit)', async () => {
    const [a, b, c] = [await newMessage(), await newMessage(), await newMessage()];
    for (const id of [a, b, c]) await db.agentBackendRun.create({ data: { message_id: id, request: {} } });
    const text = (t: string, key: string): NewClientEvent => ({
      event: 'agent_message',
      sourceKey: key,
      data: { ...base, event: 'agent_message', id: base.message_id, answer: t },
    });
    expect(await commitAnswerText(db, { messageId: c, expectedCursor: null, newCursor: '3', text: 'C', event: text('C', 'be:3') })).toBe(
      true,
    );
    // a and b start; c's entry is stale (expects no cursor, it is 3): it alone writes nothing.
    expect(
      await commitAnswerTexts(db, [
        { messageId: a, expectedCursor: null, newCursor: '2', text: 'A1', event: text('A1', 'be:2') },
        { messageId: b, expectedCursor: null, newCursor: '4', text: 'B1', event: text('B1', 'be:4') },
        { messageId: c, expectedCursor: null, newCursor: '7', text: 'XX', event: text('XX', 'be:7') },
      ]),
    ).toEqual([true, true, false]);
    expect(
      await commitAnswerTexts(db, [
        { messageId: b, expectedCursor: '4', newCursor: '6', text: 'B2', event: text('B2', 'be:6') },
        { messageId: a, expectedCursor: '2', newCursor: '5', text: 'A2', event: text('A2', 'be:5') },
      ]),
    ).toEqual([true, true]);
    await expect(
      commitAnswerTexts(db, [
        { messageId: a, expectedCursor: '5', newCursor: '8', text: 'x', event: text('x', 'be:8') },
        { messageId: a, expectedCursor: '5', newCursor: '9', text: 'y', event: text('y', 'be:9') },
      ]),
    ).rejects.toThrow('one entry per message');
    for (const [id, answer, cursor, events] of [
      [a, 'A1A2', '5', ['A1', 'A2']],
      [b, 'B1B2', '6', ['B1', 'B2']],
      [c, 'C', '3', ['C']],
    ] as const) {
      const msg = await db.message.findUniqueOrThrow({ where: { id }, include: { agent_run: true } });
      expect([msg.answer, msg.agent_run!.cursor]).toEqual([answer, cursor]);
      expect((await readEvents(db, id, 0)).map((r) => [r.seq, answerOf(r)])).toEqual(events.map((e, i) => [i + 1, e]));
    }
  });

  it('stores NUL and lone surrogates of every writer as U+FFFD (issue 47): an event, streamed text alone and in a group', async () => {
    const [one, two, three] = [await newMessage(), await newMessage(), await newMessage()];
    for (const id of [two, three]) await db.agentBackendRun.create({ data: { message_id: id, request: {} } });
    const text = (t: string, key: string): NewClientEvent => ({
      event: 'agent_message',
      sourceKey: key,
      data: { ...base, event: 'agent_message', id: base.message_id, answer: t },
    });
    await db.$transaction((tx) => appendEvents(tx, one, [text('a\u0000b \ud800', 'be:1')]));
    expect(
      await commitAnswerText(db, {
        messageId: two,
        expectedCursor: null,
        newCursor: '1',
        text: 'c\u0000d',
        event: text('c\u0000d', 'be:1'),
      }),
    ).toBe(true);
    expect(
      await commitAnswerTexts(db, [
        { messageId: two, expectedCursor: '1', newCursor: '2', text: ' \udc00e', event: text(' \udc00e', 'be:2') },
        { messageId: three, expectedCursor: null, newCursor: '2', text: '\u0000f', event: text('\u0000f', 'be:2') },
      ]),
    ).toEqual([true, true]);
    expect((await readEvents(db, one, 0)).map(answerOf)).toEqual(['a\ufffdb \ufffd']);
    expect((await readEvents(db, two, 0)).map(answerOf)).toEqual(['c\ufffdd', ' \ufffde']);
    expect((await readEvents(db, three, 0)).map(answerOf)).toEqual(['\ufffdf']);
    expect((await db.message.findUniqueOrThrow({ where: { id: two } })).answer).toBe('c\ufffdd \ufffde');
    expect((await db.message.findUniqueOrThrow({ where: { id: three } })).answer).toBe('\ufffdf');
  });
});

describe("the stream's read (followEvents, one prepared statement per wake-up)", () => {
  const TERMINAL = [...TERMINAL_CLIENT_EVENTS];
  /** The read as it was on the ORM: the rows after the cursor, then (for an empty read) the last terminal's seq. */
  async function ormRead(id: string, afterSeq: number, limit: number) {
    const events = (
      await db.messageEvent.findMany({
        where: { message_id: id, seq: { gt: afterSeq } },
        orderBy: { seq: 'asc' },
        take: limit,
        select: { seq: true, event: true, data: true },
      })
    ).map((r) => ({ seq: r.seq, event: r.event, data: r.data }));
    const terminal = await db.messageEvent.findFirst({
      where: { message_id: id, event: { in: TERMINAL } },
      orderBy: { seq: 'desc' },
      select: { seq: true },
    });
    return { events, terminalSeq: events.length === 0 ? (terminal?.seq ?? null) : null };
  }

  it('reads the events after a cursor as Prisma reads them, and the last terminal seq only when none follow', async () => {
    const [ended, open] = [await newMessage(), await newMessage()];
    const nested = { ...base, event: 'agent_thought', id: 't1', thought: 'x', tool_input: '{"a":[1,2.5,null]}', observation: '' };
    await db.$transaction((tx) =>
      appendEvents(tx, ended, [
        ev('z'),
        { event: 'agent_thought', sourceKey: 'thought', data: { ...nested, position: 1 } as never },
        { event: 'agent_message', sourceKey: 'emoji', data: { ...base, event: 'agent_message', id: 'm', answer: 'é😀 "quoted" \\ \n' } },
        ev('a'),
        {
          event: 'message_end',
          sourceKey: 'terminal:message_end',
          data: { ...base, event: 'message_end', id: 'e', metadata: { n: 1 } } as never,
        },
      ]),
    );
    await db.$transaction((tx) => appendEvents(tx, open, [ev('only')]));
    let reads = 0;
    for (const [id, last] of [
      [ended, 5],
      [open, 1],
    ] as const)
      for (const afterSeq of [0, 1, 3, last - 1, last, last + 7])
        for (const limit of [500, 2]) {
          const hot = await readEventsAfter(db, id, afterSeq, limit, TERMINAL);
          expect(hot, `${id === ended ? 'ended' : 'open'} after ${afterSeq} limit ${limit}`).toEqual(await ormRead(id, afterSeq, limit));
          reads += 1;
        }
    expect(reads).toBe(24);
    // What the reads found, spelt out (so that the comparison above is not of two empty reads).
    expect((await readEventsAfter(db, ended, 1, 2, TERMINAL)).events.map((e) => [e.seq, e.event])).toEqual([
      [2, 'agent_thought'],
      [3, 'agent_message'],
    ]);
    expect((await readEventsAfter(db, ended, 5, 500, TERMINAL)).terminalSeq).toBe(5);
    expect((await readEventsAfter(db, open, 1, 500, TERMINAL)).terminalSeq).toBeNull();
  });

  it('a stream re-attached at its end is one statement, a live one wakes with one statement a read', async () => {
    const id = await newMessage();
    await db.$transaction((tx) =>
      appendEvents(tx, id, [
        ev('a'),
        { event: 'message_end', sourceKey: 'terminal:message_end', data: { ...base, event: 'message_end', id: 'e' } as never },
      ]),
    );
    const counted = countingDb(dbUrl, { max: 1 });
    const notifier = new EventNotifier(dbUrl); // not started: these readers need no notification
    try {
      const follow = async (afterSeq: number) => {
        const out: number[] = [];
        for await (const e of followEvents(counted.db, notifier, id, afterSeq, new AbortController().signal)) out.push(e.seq);
        return out;
      };
      let seen: number[] = [];
      // The ORM read sent two (the empty batch, then the terminal's seq).
      expect(await counted.count(async () => (seen = await follow(2)))).toBe(1);
      expect(seen).toEqual([]);
      expect(await counted.count(async () => (seen = await follow(0)))).toBe(1);
      expect(seen).toEqual([1, 2]);
    } finally {
      await counted.db.$disconnect();
    }
  });

  it('prepares its statement once per connection, or sends it unnamed with preparedStatements off (HOT_SQL_PREPARED=false)', async () => {
    const id = await newMessage();
    await db.$transaction((tx) => appendEvents(tx, id, [ev('a'), ev('b')]));
    for (const preparedStatements of [true, false]) {
      // One connection, so the session that ran the reads is the one asked.
      const one = createDb(dbUrl, { max: 1, preparedStatements });
      try {
        expect((await readEvents(one, id, 0)).map(answerOf)).toEqual(['a#0', 'b#0']);
        expect((await readEvents(one, id, 1)).map(answerOf)).toEqual(['b#0']);
        const names = await poolOf(one).pool.query<{ name: string }>('select name from pg_prepared_statements order by name');
        expect(names.rows.map((r) => r.name)).toEqual(preparedStatements ? ['hot_events_after_v1'] : []);
      } finally {
        await one.$disconnect();
      }
    }
  });
});
