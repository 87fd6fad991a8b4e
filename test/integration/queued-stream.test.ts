/**
 * A queued message's stream says it is queued (issue 34/35 follow-up, docs/PROTOCOL.md §1 `message_queued`): over
 * HTTP + SSE on the real stack, a message enqueued behind a running turn gets `message_queued` as its stream's first
 * frame — its own id, its place in line (two queued: 1 and 2), the strategy, no `id:` — then its turn's events as
 * usual once it runs. The events route says it again while the message waits; blocking mode is unchanged. The
 * console's history of the conversation and its agent log show the same place in line and the files' names and sizes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { MessageQueuedEvent } from '../../core/protocol/client-events.js';
import { CONSOLE_RESPONSES } from '../../api/openapi/console.js';
import { chat, FrameReader, postChat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { tinyPng, upload } from '../api/helpers.js';

let stack: Stack;
let key: string;
const headers = () => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

beforeAll(async () => {
  stack = await startTestStack('queued_stream', { env: { DEMO_MODEL_TOKEN_DELAY_MS: 0 } });
  key = stack.demo!.apiKey;
});
afterAll(async () => stack?.stop());

const consoleGet = async (path: string) => {
  const res = await fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}` },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
};

/** A conversation with one finished turn, then a long slow turn streaming (its reader and message id, after 3 deltas). */
async function busyConversation(user: string) {
  const first = await chat(stack.apiUrl, key, { query: `Remember me: I am ${user}.`, user });
  const conversationId = first.frames.at(-1)!.data.conversation_id as string;
  const res = await postChat(stack.apiUrl, key, { query: '/slow 40 /long 300', user, conversation_id: conversationId });
  const reader = new FrameReader(res);
  let n = 0;
  const head = await reader.read((f) => f.event === 'agent_message' && ++n === 3);
  return { conversationId, reader, runningId: head[0]!.data.task_id as string };
}

/** The first frame of a stream (pings skipped) and the reader to go on with. */
async function firstFrame(res: Response): Promise<{ first: ClientFrame; reader: FrameReader }> {
  expect(res.status).toBe(200);
  const reader = new FrameReader(res);
  const [first] = await reader.read(() => true);
  return { first: first!, reader };
}

describe('message_queued', () => {
  it('is the first frame of an enqueued message (its id and place: 1 and 2), then its turn streams as usual', async () => {
    const user = 'quentin';
    const busy = await busyConversation(user);
    const png = tinyPng();
    const up = await upload(stack.apiUrl, key, png, 'queued.png', user, 'image/png');
    expect(up.status).toBe(201);
    const uploadId = (up.body as { id: string }).id;

    const sendQueued = (query: string, extra: Record<string, unknown> = {}) =>
      postChat(stack.apiUrl, key, { query, user, conversation_id: busy.conversationId, multitask_strategy: 'enqueue', ...extra });
    const a = await firstFrame(
      await sendQueued('first in line', { files: [{ type: 'image', transfer_method: 'local_file', upload_file_id: uploadId }] }),
    );
    const b = await firstFrame(await sendQueued('second in line'));

    const rows = await stack.db.message.findMany({ where: { conversation_id: busy.conversationId, status: 'queued' } });
    const idOf = (query: string) => rows.find((m) => m.query === query)!.id;
    for (const [f, query, position] of [
      [a.first, 'first in line', 1],
      [b.first, 'second in line', 2],
    ] as const) {
      expect(f.event).toBe('message_queued');
      expect(f.id).toBeUndefined(); // not in the event log: Last-Event-ID stays where it was
      const data = MessageQueuedEvent.parse(f.data);
      expect(data).toMatchObject({ task_id: idOf(query), message_id: idOf(query), conversation_id: busy.conversationId, position });
      expect(data.strategy).toBe('enqueue');
    }

    // Re-attached while it waits: said again, with its place now.
    const reattach = new AbortController();
    const again = await firstFrame(
      await fetch(`${stack.apiUrl}/v1/chat-messages/${idOf('second in line')}/events?user=${user}`, {
        headers: headers(),
        signal: reattach.signal,
      }),
    );
    expect(again.first.event).toBe('message_queued');
    expect(again.first.data).toMatchObject({ task_id: idOf('second in line'), position: 2 });
    reattach.abort();

    // The console's history of the conversation and its agent log: the same place in line, the file named and sized.
    const history = (await consoleGet(`/agent/conversations/${busy.conversationId}/messages`)).data as Record<string, unknown>[];
    const row = (query: string) => history.find((m) => m.query === query)!;
    expect(row('first in line')).toMatchObject({ turn_status: 'queued', queue_position: 1 });
    expect(row('second in line')).toMatchObject({ turn_status: 'queued', queue_position: 2 });
    expect(row('first in line').message_files).toEqual([
      expect.objectContaining({ upload_file_id: uploadId, filename: 'queued.png', mime_type: 'image/png', size: png.length }),
    ]);
    const log = await consoleGet(`/agent/logs?conversation_id=${busy.conversationId}&message_id=${idOf('second in line')}`);
    expect(log.meta).toMatchObject({ status: 'queued', queue_position: 2 });
    expect(CONSOLE_RESPONSES.AgentLogResponse.safeParse(log).error).toBeUndefined();
    const logA = await consoleGet(`/agent/logs?conversation_id=${busy.conversationId}&message_id=${idOf('first in line')}`);
    expect(CONSOLE_RESPONSES.AgentLogResponse.safeParse(logA).error).toBeUndefined();
    expect(logA.files).toEqual([expect.objectContaining({ filename: 'queued.png', mime_type: 'image/png', size: png.length })]);

    // Blocking mode is unchanged: one JSON answer once its turn ran (third in line).
    const blocking = fetch(`${stack.apiUrl}/v1/chat-messages`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({
        inputs: {},
        query: 'third in line',
        user,
        conversation_id: busy.conversationId,
        multitask_strategy: 'enqueue',
        response_mode: 'blocking',
      }),
    });

    // The running turn ends (stopped); the queued ones then stream their turns as usual, in order.
    await fetch(`${stack.apiUrl}/v1/chat-messages/${busy.runningId}/stop`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ user }),
    });
    await busy.reader.read();
    for (const [reader, query] of [
      [a.reader, 'first in line'],
      [b.reader, 'second in line'],
    ] as const) {
      const rest = await reader.read();
      expect(rest.map((f) => f.event)).toContain('agent_message');
      expect(rest.map((f) => f.event).slice(-2)).toEqual(['message', 'message_end']);
      expect(rest.map((f) => f.event)).not.toContain('message_queued');
      // The turn's own events: from the event log, ids from 1 on, all of this message.
      expect(rest.map((f) => Number(f.id))).toEqual(rest.map((_, i) => i + 1));
      for (const f of rest) expect(f.data.task_id).toBe(idOf(query));
    }
    const res = await blocking;
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ event: 'message', conversation_id: busy.conversationId, mode: 'agent' });
    expect(body.answer).toEqual(expect.any(String));
    const third = await stack.db.message.findUniqueOrThrow({ where: { id: body.message_id as string } });
    expect(third).toMatchObject({ query: 'third in line', status: 'succeeded' });

    // Not queued any more: re-attaching replays the turn, with no message_queued.
    const replay = new FrameReader(
      await fetch(`${stack.apiUrl}/v1/chat-messages/${idOf('first in line')}/events?user=${user}`, { headers: headers() }),
    );
    const replayed = await replay.read();
    expect(replayed[0]!.event).not.toBe('message_queued');
    expect(replayed.at(-1)!.event).toBe('message_end');
  });

  it('interrupt: the follow-up says it is queued (next, strategy interrupt), then answers once the turn in flight stopped', async () => {
    const user = 'ines';
    const busy = await busyConversation(user);
    const { first, reader } = await firstFrame(
      await postChat(stack.apiUrl, key, { query: 'instead', user, conversation_id: busy.conversationId, multitask_strategy: 'interrupt' }),
    );
    expect(first.event).toBe('message_queued');
    expect(MessageQueuedEvent.parse(first.data)).toMatchObject({
      position: 1,
      strategy: 'interrupt',
      conversation_id: busy.conversationId,
    });
    const id = first.data.task_id as string;
    expect((await stack.db.message.findUniqueOrThrow({ where: { id } })).query).toBe('instead');
    await busy.reader.read();
    const rest = await reader.read();
    expect(rest.at(-1)!.event).toBe('message_end');
    for (const f of rest) expect(f.data.task_id).toBe(id);
    expect((await stack.db.message.findUniqueOrThrow({ where: { id } })).status).toBe('succeeded');
  });
});
