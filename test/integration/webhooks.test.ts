/**
 * Webhooks (issue 35 item 4) on the real stack: a turn's outcome, committed by the turn, fans out to the app's
 * webhooks (a trigger in the same transaction), each delivery a `deliverWebhook` workflow that signs the body and
 * retries with backoff (short here: WEBHOOK_RETRY_*), through the tools' SSRF guard. The receivers are local HTTP
 * servers, so the first stack allows private networks (WEBHOOK_ALLOW_PRIVATE_NETWORK) and the second does not.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../stack/start-stack.js';
import { chat } from '../support/sse.js';
import { AUTOMATION_RESPONSES } from '../../api/openapi/automation.js';
import { encryptWebhookSecret } from '../../core/domain/webhooks/secret.js';
import { startTestStack } from '../support/stack.js';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  answeredWith: number;
}

/** A receiver answering each request with the next status of `statuses` (the last one repeats). */
async function receiver(statuses: number[]) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = statuses[Math.min(received.length, statuses.length - 1)]!;
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answeredWith: status });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'receiver down');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/dify`;
  return { url, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** The receiver's check exactly as docs/PROTOCOL.md "Scheduled turns and webhooks" shows it. */
function verify(secret: string, body: string, header: string, toleranceS = 300): boolean {
  const fields = Object.fromEntries(header.split(',').map((kv) => kv.split('=') as [string, string]));
  const t = Number(fields.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceS) return false;
  const expected = crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return (
    typeof fields.v1 === 'string' &&
    fields.v1.length === expected.length &&
    crypto.timingSafeEqual(Buffer.from(fields.v1), Buffer.from(expected))
  );
}

const consoleApi = (stack: Stack, path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, deadlineMs = 30_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface DeliveryView {
  id: string;
  event: string;
  event_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  response_code: number | null;
  redelivery_of: string | null;
}

async function turn(stack: Stack, query: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query, user: 'hook-user' });
  expect(status).toBe(200);
  const end = frames.find((f) => f.event === 'message_end');
  expect(end, JSON.stringify(frames.at(-1))).toBeDefined();
  return String(end!.data.message_id);
}

describe('webhooks, private network allowed', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startTestStack('webhooks', {
      env: {
        WEBHOOK_ALLOW_PRIVATE_NETWORK: true,
        WEBHOOK_RETRY_INITIAL_MS: 200,
        WEBHOOK_RETRY_MAX_INTERVAL_MS: 400,
        WEBHOOK_DISPATCH_POLL_MS: 200,
      },
    });
  });
  afterAll(async () => stack?.stop());

  it('a receiver failing twice gets the turn outcome on the third attempt, signed; the log shows 3 attempts; redeliver resends it', async () => {
    const rx = await receiver([500, 503, 200]);
    try {
      const res = await consoleApi(stack, '/webhooks', { method: 'POST', body: { url: rx.url, events: ['turn.succeeded'] } });
      const hook = (await res.json()) as { id: string; secret: string; events: string[] };
      expect(res.status).toBe(201);
      expect(AUTOMATION_RESPONSES.CreatedWebhookResponse.safeParse(hook).error).toBeUndefined();
      expect(hook.secret).toMatch(/^whsec_/);
      // Encrypted at rest; never listed again.
      const stored = await stack.db.appWebhook.findUniqueOrThrow({ where: { id: hook.id } });
      expect(stored.encrypted_secret).not.toContain(hook.secret);
      expect(JSON.stringify(await (await consoleApi(stack, '/webhooks')).json())).not.toContain(hook.secret);

      const messageId = await turn(stack, 'hello webhook');
      const log = () => consoleApi(stack, `/webhooks/${hook.id}/deliveries`).then((r) => r.json() as Promise<{ data: DeliveryView[] }>);
      const [delivery] = await waitFor('the delivery to succeed', async () => {
        const { data } = await log();
        return data.length === 1 && data[0]!.status === 'succeeded' && data;
      });
      expect(delivery).toMatchObject({ event: 'turn.succeeded', status: 'succeeded', attempts: 3, response_code: 200, last_error: null });
      expect(AUTOMATION_RESPONSES.WebhookDeliveryListResponse.safeParse(await log()).error).toBeUndefined();
      const one: unknown = await (await consoleApi(stack, `/webhooks/${hook.id}/deliveries/${delivery!.id}`)).json();
      expect(AUTOMATION_RESPONSES.WebhookDeliveryDetailResponse.safeParse(one).error).toBeUndefined();
      expect(rx.received.map((r) => r.answeredWith)).toEqual([500, 503, 200]);

      const accepted = rx.received.filter((r) => r.answeredWith === 200);
      expect(accepted).toHaveLength(1);
      const { headers, body } = accepted[0]!;
      expect(verify(hook.secret, body, String(headers['dify-signature']))).toBe(true);
      expect(verify('whsec_wrong', body, String(headers['dify-signature']))).toBe(false);
      expect(verify(hook.secret, `${body} `, String(headers['dify-signature']))).toBe(false);
      const payload = JSON.parse(body) as { id: string; event: string; app_id: string; data: Record<string, unknown> };
      const message = await stack.db.message.findUniqueOrThrow({ where: { id: messageId } });
      expect(payload).toMatchObject({ id: delivery!.event_id, event: 'turn.succeeded', app_id: stack.demo!.appId });
      expect(payload.data).toMatchObject({
        message_id: messageId,
        conversation_id: message.conversation_id,
        status: 'succeeded',
        answer: message.answer,
      });
      expect(headers['dify-event']).toBe('turn.succeeded');
      expect(headers['dify-delivery']).toBe(delivery!.id);

      // Redeliver: a new delivery of the same event (same event id and body), logged as such.
      const re = await consoleApi(stack, `/webhooks/${hook.id}/deliveries/${delivery!.id}/redeliver`, { method: 'POST' });
      expect(re.status).toBe(202);
      const again = (await re.json()) as DeliveryView;
      expect(again).toMatchObject({ redelivery_of: delivery!.id, event_id: delivery!.event_id });
      await waitFor('the redelivery', async () => (await log()).data.find((d) => d.id === again.id && d.status === 'succeeded'));
      expect(rx.received).toHaveLength(4);
      expect(JSON.parse(rx.received[3]!.body)).toEqual(payload);
      expect(verify(hook.secret, rx.received[3]!.body, String(rx.received[3]!.headers['dify-signature']))).toBe(true);
      // Both deliveries ran as workflows of their own, visible in Temporal.
      const wf = await stack.temporal.workflow.getHandle(`webhook-delivery-${delivery!.id}`).describe();
      expect(wf.type).toBe('deliverWebhook');
      expect((await consoleApi(stack, `/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(204);
    } finally {
      await rx.close();
    }
  }, 60_000);

  it('user:password@ is refused even where private networks are allowed (it would be stored and shown in clear)', async () => {
    const res = await consoleApi(stack, '/webhooks', { method: 'POST', body: { url: 'http://user:secret@127.0.0.1:9/hooks' } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('invalid_webhook_url');
    expect(body.message).toContain('user:password@');
    expect(body.message).not.toContain('secret@');
    expect(await stack.db.appWebhook.count({ where: { url: { contains: 'secret@' } } })).toBe(0);
  });
});

describe('webhooks, private network not allowed (the default)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startTestStack('webhooks_guarded', { env: { WEBHOOK_RETRY_INITIAL_MS: 200, WEBHOOK_DISPATCH_POLL_MS: 200 } });
  });
  afterAll(async () => stack?.stop());

  it('a URL to loopback, metadata or a private address, or with user:password@, is refused when created or changed: 400 invalid_webhook_url, nothing stored', async () => {
    const refused = [
      'http://127.0.0.1:9/hooks',
      'http://localhost:9/hooks',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/hooks',
      'http://[::ffff:127.0.0.1]/hooks',
      'http://10.1.2.3/hooks',
      'http://192.168.0.1/hooks',
      'http://2130706433/hooks',
      'http://0x7f.1/hooks',
      'https://user:pass@93.184.216.34/hooks',
      'https://token@93.184.216.34/hooks',
    ];
    for (const url of refused) {
      const res = await consoleApi(stack, '/webhooks', { method: 'POST', body: { url } });
      const body = (await res.json()) as { code: string; message: string };
      expect([url, res.status, body.code]).toEqual([url, 400, 'invalid_webhook_url']);
      expect(body.message).toMatch(/^url: /);
      expect(body.message).not.toContain('pass@');
    }
    expect(await stack.db.appWebhook.count({ where: { app_id: stack.demo!.appId } })).toBe(0);
    // A public address is accepted; changing it to a loopback one is refused and leaves it as it was.
    const ok = await consoleApi(stack, '/webhooks', { method: 'POST', body: { url: 'https://93.184.216.34/hooks', enabled: false } });
    expect(ok.status).toBe(201);
    const { id } = (await ok.json()) as { id: string };
    const patch = await consoleApi(stack, `/webhooks/${id}`, { method: 'PATCH', body: { url: 'http://127.0.0.1:9/hooks' } });
    expect(patch.status).toBe(400);
    expect(((await patch.json()) as { code: string }).code).toBe('invalid_webhook_url');
    expect((await stack.db.appWebhook.findUniqueOrThrow({ where: { id } })).url).toBe('https://93.184.216.34/hooks');
    await consoleApi(stack, `/webhooks/${id}`, { method: 'DELETE' });
  });

  it('a loopback receiver stored before the check (or a name whose address changed) is refused at delivery: logged as refused, never called, not retried', async () => {
    const rx = await receiver([200]);
    try {
      // Saved as an older api did (the route refuses it now): only the delivery guard stands between it and loopback.
      const hook = await stack.db.appWebhook.create({
        data: {
          tenant_id: stack.demo!.tenantId,
          app_id: stack.demo!.appId,
          url: rx.url,
          events: ['turn.succeeded', 'turn.human_input_required'],
          encrypted_secret: encryptWebhookSecret(stack.config.ENCRYPTION_KEY, 'whsec_stored_before'),
        },
      });
      expect(hook.events).toContain('turn.human_input_required');
      await turn(stack, 'hello guard');
      const [delivery] = await waitFor('the refusal', async () => {
        const { data } = (await (await consoleApi(stack, `/webhooks/${hook.id}/deliveries`)).json()) as { data: DeliveryView[] };
        return data.length === 1 && data[0]!.status === 'refused' && data;
      });
      expect(delivery!.attempts).toBe(1);
      expect(delivery!.last_error).toMatch(/private, loopback or otherwise non-public/);
      const wf = stack.temporal.workflow.getHandle(`webhook-delivery-${delivery!.id}`);
      expect(await wf.result()).toBe('refused');
      expect(rx.received).toHaveLength(0);
    } finally {
      await rx.close();
    }
  }, 60_000);
});
