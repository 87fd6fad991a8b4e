/**
 * Webhooks, what is left of issue 35 item 4, on the real stack: a `turn.human_input_required` delivery carries what
 * its receiver needs to answer the form (id, token, fields, actions, expiry, and the submit route with its user), and
 * the receiver answers it through that route alone — the turn resumes and `turn.succeeded` follows; a debugger turn's
 * names the console's route. The delivery log is pruned by age: the dispatcher's loop deletes finished deliveries
 * older than WEBHOOK_DELIVERY_RETENTION_DAYS and keeps younger ones and pending ones whatever their age.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/platform/logger.js';
import { WEBHOOK_DELIVERY_RETENTION_DAYS } from '../../core/domain/webhooks/retention.js';
import type { Stack } from '../../stack/start-stack.js';
import { WebhookDispatcher } from '../../worker/webhook-dispatcher.js';
import { chat, readFrames } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

interface Payload {
  id: string;
  event: string;
  data: Record<string, unknown> & { human_input?: HumanInput };
}
interface HumanInput {
  form_id: string;
  form_token: string;
  title: string;
  question: string;
  inputs: { name: string }[];
  actions: { id: string }[];
  expiration_time: number;
  submit: { method: string; path: string; auth: string; user: string | null };
}

let stack: Stack;
const received: Payload[] = [];
let server: http.Server;
let hookId: string;

const consoleApi = (path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false> | T | null | undefined | false): Promise<T> {
  const end = Date.now() + 30_000;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  stack = await startTestStack('webhooks_form_retention', {
    env: { WEBHOOK_ALLOW_PRIVATE_NETWORK: true, WEBHOOK_RETRY_INITIAL_MS: 200, WEBHOOK_DISPATCH_POLL_MS: 200 },
  });
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Payload);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  const res = await consoleApi('/webhooks', { method: 'POST', body: { url, events: ['turn.human_input_required', 'turn.succeeded'] } });
  expect(res.status).toBe(201);
  hookId = ((await res.json()) as { id: string }).id;
});
afterAll(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await stack?.stop();
});

describe('turn.human_input_required', () => {
  it('carries the form and its submit route; the receiver answers through it and the turn resumes', async () => {
    const user = 'hook-asker';
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: '/ask What is your name?', user });
    const hir = frames.find((f) => f.event === 'human_input_required');
    expect(hir, JSON.stringify(frames.at(-1)?.data)).toBeDefined();
    const messageId = hir!.data.message_id as string;
    const streamed = hir!.data.data as { form_id: string; form_token: string; expiration_time: number };

    const asked = await waitFor('the human_input_required delivery', () =>
      received.find((p) => p.event === 'turn.human_input_required' && p.data.message_id === messageId),
    );
    const form = asked.data.human_input!;
    expect(form).toMatchObject({
      form_id: streamed.form_id,
      form_token: streamed.form_token,
      expiration_time: streamed.expiration_time,
      question: 'What is your name?',
      inputs: [{ name: 'answer' }],
      actions: [{ id: 'submit' }],
      submit: { method: 'POST', path: `/v1/form/human_input/${streamed.form_token}`, auth: 'app_key', user },
    });
    const row = await stack.db.humanInputForm.findUniqueOrThrow({ where: { message_id: messageId } });
    expect([row.id, row.token]).toEqual([form.form_id, form.form_token]);

    // The receiver answers with nothing but the payload (and the app key it holds).
    const answer = await fetch(`${stack.apiUrl}${form.submit.path}`, {
      method: form.submit.method,
      headers: { authorization: `Bearer ${stack.demo!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: { [form.inputs[0]!.name]: 'Hana' }, action: form.actions[0]!.id, user: form.submit.user }),
    });
    expect(answer.status).toBe(200);
    const resumed = ((await answer.json()) as { task_id: string }).task_id;
    const done = await waitFor('the resumed turn to succeed', () =>
      received.find((p) => p.event === 'turn.succeeded' && p.data.message_id === resumed),
    );
    expect(done.data.conversation_id).toBe(asked.data.conversation_id);
    expect(done.data.human_input).toBeUndefined();
  });

  it("a debugger turn's names the console's form route and no user", async () => {
    const res = await consoleApi('/agent/debug/chat-messages', { method: 'POST', body: { query: '/ask Which colour?' } });
    expect(res.status).toBe(200);
    const hir = (await readFrames(res)).find((f) => f.event === 'human_input_required');
    expect(hir).toBeDefined();
    const messageId = hir!.data.message_id as string;
    const token = (hir!.data.data as { form_token: string }).form_token;
    const asked = await waitFor('the debugger delivery', () =>
      received.find((p) => p.event === 'turn.human_input_required' && p.data.message_id === messageId),
    );
    expect(asked.data.human_input!.submit).toEqual({
      method: 'POST',
      path: `/console/api/apps/${stack.demo!.appId}/agent/debug/forms/${token}`,
      auth: 'console_key',
      user: null,
    });
    const got = await consoleApi(`/agent/debug/forms/${token}`);
    expect(got.status).toBe(200);
  });
});

describe('delivery retention', () => {
  it(`the dispatcher's loop deletes finished deliveries older than ${WEBHOOK_DELIVERY_RETENTION_DAYS} days, keeps the rest`, async () => {
    const days = (n: number) => new Date(Date.now() - n * 86_400_000);
    const old = days(WEBHOOK_DELIVERY_RETENTION_DAYS + 1);
    const young = days(WEBHOOK_DELIVERY_RETENTION_DAYS - 1);
    const rows = [
      { status: 'succeeded', created_at: old, gone: true },
      { status: 'failed', created_at: old, gone: true },
      { status: 'refused', created_at: old, gone: true },
      { status: 'pending', created_at: old, gone: false },
      { status: 'succeeded', created_at: young, gone: false },
      { status: 'failed', created_at: young, gone: false },
    ];
    const ids: string[] = [];
    for (const r of rows) {
      const d = await stack.db.webhookDelivery.create({
        data: {
          webhook_id: hookId,
          app_id: stack.demo!.appId,
          event: 'turn.succeeded',
          event_id: crypto.randomUUID(),
          payload: {},
          status: r.status,
          // Already dispatched: the loop under test only prunes them (a pending one is a delivery still retrying).
          dispatched_at: r.created_at,
          created_at: r.created_at,
        },
      });
      ids.push(d.id);
    }
    const gone = ids.filter((_, i) => rows[i]!.gone);
    const kept = ids.filter((_, i) => !rows[i]!.gone);

    // A dispatcher of its own (the worker's pruned when it started, before these rows existed, and waits an hour).
    const dispatcher = new WebhookDispatcher({
      db: stack.db,
      client: stack.temporal,
      config: { ...stack.config, WEBHOOK_DISPATCH_POLL_MS: 100 },
      logger: createLogger('webhook-retention-test', 'warn'),
    });
    dispatcher.start();
    try {
      await waitFor(
        'the old finished rows to be pruned',
        async () => (await stack.db.webhookDelivery.count({ where: { id: { in: gone } } })) === 0,
      );
    } finally {
      await dispatcher.stop();
    }
    expect(await stack.db.webhookDelivery.count({ where: { id: { in: gone } } })).toBe(0);
    expect((await stack.db.webhookDelivery.findMany({ where: { id: { in: kept } } })).map((d) => d.id).sort()).toEqual([...kept].sort());
    // The console's log lists what is kept, and nothing pruned.
    const log = (await (await consoleApi(`/webhooks/${hookId}/deliveries?limit=100`)).json()) as { data: { id: string }[] };
    const listed = log.data.map((d) => d.id);
    expect(listed).toEqual(expect.arrayContaining(kept));
    for (const id of gone) expect(listed).not.toContain(id);
  });
});
