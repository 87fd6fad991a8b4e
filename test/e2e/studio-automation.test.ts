/**
 * The studio's New agent, Schedules and Webhooks screens in a browser (issues 34 and 35 item 5): real Chromium on
 * /studio against the real stack (Temporal Schedules on the dev server, webhook deliveries as workflows) and the demo
 * model, at a desktop and a phone size. New agent: a taken name and an unknown prompt mention are refused next to
 * their field; a valid one lands in the agent screen on its config. Schedules: an interval in a time zone and a cron
 * one, listed with their next run from Temporal; pause/resume (Temporal agrees), run now (its turn ends and the list
 * shows it), delete. Webhooks: an endpoint whose secret is shown once (and verifies the receiver's signatures), a
 * receiver that fails once so the log shows two attempts, and redeliver (the same event id again). axe-core finds no
 * serious violation on any of the screens; screenshots go to test-results/screenshots (CI artifacts).
 */
import http from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../core/domain/webhooks/signature.js';
import type { Stack } from '../../stack/start-stack.js';
import { scheduleIdForRow } from '../../workflows/automation-definitions.js';
import { axeViolations, chromiumPath, screenshot } from '../support/browser.js';
import { checkPhoneScreens, closeLocal, listenLocal, openStudio, studioScreen } from '../support/studio-page.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
let browser: Browser;
let page: Page;
let receiver: http.Server;
let receiverUrl = '';
/** What the receiver got: each POST's headers and raw body; it answers 500 to the first one, 200 after. */
const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
const failures: string[] = [];
/** 4xx answers a test provoked on purpose, taken out of `failures` once it saw them. */
const expectedFailure = (pattern: RegExp) => {
  const i = failures.findIndex((f) => pattern.test(f));
  expect(i, `${pattern} among ${failures.join('; ')}`).toBeGreaterThanOrEqual(0);
  failures.splice(i, 1);
};

const status = () => page.locator('#status').textContent();
const screen = (name: string) => studioScreen(page, name);
const appId = () => page.locator('#apps li.active').getAttribute('data-app');

describe.runIf(chromiumPath)('the studio’s New agent, Schedules and Webhooks screens in a browser', () => {
  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.statusCode = received.length === 1 ? 500 : 200;
        res.end(received.length === 1 ? 'not yet' : 'ok');
      });
    });
    receiverUrl = `${await listenLocal(receiver)}/hooks/agent`;
    stack = await startTestStack('studio_automation', {
      env: {
        DEMO_MODEL_TOKEN_DELAY_MS: 0,
        WEBHOOK_ALLOW_PRIVATE_NETWORK: true,
        WEBHOOK_RETRY_INITIAL_MS: 200,
        WEBHOOK_RETRY_MAX_INTERVAL_MS: 400,
        WEBHOOK_DISPATCH_POLL_MS: 200,
      },
    });
    ({ browser, page } = await openStudio(stack, failures));
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await closeLocal(receiver);
  });

  it('New agent: refuses a taken name and an unknown mention next to their fields, then creates one and opens its config', async () => {
    await page.click('aside button.new-app');
    await expect.poll(() => page.evaluate(() => document.body.dataset.screen)).toBe('new-app');
    await expect.poll(() => page.locator('#na-provider option').allTextContents()).toContain('demo');
    await expect.poll(() => page.locator('#na-model option').count()).toBeGreaterThan(0);

    await page.fill('#na-name', 'Demo Agent');
    await page.click('#na-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#na-form .field-error[data-error-for="name"]').textContent())
      .toContain('already has an app named');
    expectedFailure(/^409 .*\/console\/api\/apps$/);

    await page.fill('#na-name', 'Support agent');
    await page.fill('#na-prompt', 'Use {{#tool.web_search#}} for everything.');
    await page.click('#na-form button[type="submit"]');
    await expect
      .poll(() => page.locator('#na-form .field-error[data-error-for="prompt.system_prompt"]').textContent())
      .toContain('web_search');
    expect(await status()).toBe('Not created: fix the marked fields.');
    expectedFailure(/^400 .*\/console\/api\/apps$/);
    expect(await stack.db.app.count({ where: { name: 'Support agent' } })).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'studio-new-app-errors-desktop.png');

    await page.fill('#na-icon', '🦜');
    await page.fill('#na-description', 'Answers customers.');
    await page.selectOption('#na-provider', 'demo');
    await page.selectOption('#na-model', 'demo-chat');
    await page.fill('#na-prompt', 'You are the support agent. Be kind.');
    await page.click('#na-form button[type="submit"]');
    // It lands in the agent screen, on the new app's config.
    await expect.poll(() => page.evaluate(() => document.body.dataset.screen)).toBe('agent');
    await expect.poll(() => page.locator('#apps li.active').textContent()).toBe('Support agent');
    expect(await page.locator('#agent-name').textContent()).toBe('Support agent');
    await expect.poll(() => page.inputValue('#f-prompt')).toBe('You are the support agent. Be kind.');
    expect(await page.inputValue('#f-provider')).toBe('demo');
    expect(await page.inputValue('#f-model')).toBe('demo-chat');
    const app = await stack.db.app.findFirstOrThrow({ where: { name: 'Support agent' }, include: { agent: true } });
    expect(await appId()).toBe(app.id);
    expect(app.icon).toBe('🦜');
    expect(app.description).toBe('Answers customers.');
    expect(app.tenant_id).toBe(stack.demo!.tenantId);
    expect(await stack.db.agentConfigVersion.count({ where: { agent_id: app.agent!.id } })).toBe(1);
    // The icon shows before the name in the agents list (not part of its text).
    expect(await page.locator('#apps li.active').getAttribute('data-icon')).toBe('🦜');
    expect(failures).toEqual([]);
    await screenshot(page, 'studio-new-app-created-desktop.png');
  }, 60_000);

  it('Schedules: creates an interval and a cron schedule in time zones, lists their next run, pauses, resumes, runs now, deletes', async () => {
    // The list carries each schedule's next runs: the screen asks for no schedule one at a time.
    const perSchedule: string[] = [];
    const onRequest = (r: { method(): string; url(): string }) => {
      if (r.method() === 'GET' && /\/schedules\/[0-9a-f-]{36}$/.test(new URL(r.url()).pathname)) perSchedule.push(r.url());
    };
    page.on('request', onRequest);
    await screen('schedules');
    await page.fill('#sc-name', 'Hourly check');
    await page.selectOption('#sc-kind', 'interval');
    await page.fill('#sc-every', '604800');
    await page.fill('#sc-zone', 'Europe/Berlin');
    await page.fill('#sc-query', '/echo scheduled hello');
    await page.fill('#sc-inputs', '{}');
    await page.fill('#sc-user', 'sched-user');
    await page.click('#sc-create button[type="submit"]');
    await expect.poll(status).toBe('Created the schedule Hourly check.');
    const hourly = page.locator('#sc-table tbody tr[data-name="Hourly check"]');
    await expect.poll(() => hourly.textContent()).toContain('every 7 days · Europe/Berlin');
    const next = async () => (await hourly.locator('.next-run').textContent()) ?? '';
    expect(await next()).not.toBe('—');
    expect(await next()).not.toBe('paused');
    const row = await stack.db.appSchedule.findFirstOrThrow({ where: { name: 'Hourly check' } });
    const described = await stack.temporal.schedule.getHandle(scheduleIdForRow(row.id)).describe();
    expect(described.spec.timezone).toBe('Europe/Berlin');
    // The page shows Temporal's next run (in the browser's locale).
    const nextAt = described.info.nextActionTimes[0]!;
    expect(await next()).toBe(await page.evaluate((ms) => new Date(Math.floor(ms / 1000) * 1000).toLocaleString(), nextAt.getTime()));

    await page.fill('#sc-name', 'Weekday digest');
    await page.selectOption('#sc-kind', 'cron');
    await page.fill('#sc-cron', '0 9 * * 1-5');
    await page.fill('#sc-zone', 'America/New_York');
    await page.fill('#sc-query', 'What changed?');
    await page.fill('#sc-inputs', '{"topic": "sales"}');
    await page.selectOption('#sc-mode', 'single');
    await page.click('#sc-create button[type="submit"]');
    await expect.poll(status).toBe('Created the schedule Weekday digest.');
    const digest = page.locator('#sc-table tbody tr[data-name="Weekday digest"]');
    await expect.poll(() => digest.textContent()).toContain('cron 0 9 * * 1-5 · America/New_York');
    expect(await digest.textContent()).toContain('one conversation');
    expect(await digest.locator('.next-run').textContent()).not.toBe('—');
    page.off('request', onRequest);
    expect(perSchedule).toEqual([]);
    const digestRow = await stack.db.appSchedule.findFirstOrThrow({ where: { name: 'Weekday digest' } });
    expect(digestRow.inputs).toEqual({ topic: 'sales' });
    expect(digestRow.app_id).toBe(await appId());
    expect(await page.locator('#sc-pager').textContent()).toBe('2 schedules');

    // Pause: Temporal's schedule is paused and the list says so; resume.
    await hourly.locator('button:has-text("Pause")').click();
    await expect.poll(next).toBe('paused');
    expect((await stack.temporal.schedule.getHandle(scheduleIdForRow(row.id)).describe()).state.paused).toBe(true);
    await hourly.locator('button:has-text("Resume")').click();
    await expect.poll(next).not.toBe('paused');
    expect((await stack.temporal.schedule.getHandle(scheduleIdForRow(row.id)).describe()).state.paused).toBe(false);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'studio-schedules-desktop.png');

    // Delete the cron one: gone from the list, the database and Temporal.
    await digest.locator('button:has-text("Delete")').click();
    await expect.poll(status).toBe('Deleted Weekday digest.');
    await expect.poll(() => digest.count()).toBe(0);
    expect(await stack.db.appSchedule.count({ where: { id: digestRow.id } })).toBe(0);
    await expect(stack.temporal.schedule.getHandle(scheduleIdForRow(digestRow.id)).describe()).rejects.toThrow();
    expect(failures).toEqual([]);
  }, 90_000);

  it('Webhooks: an endpoint with its secret shown once, a schedule run delivered after a failed attempt, redelivered', async () => {
    await screen('webhooks');
    // The event checkboxes are the api's list (GET /console/api/webhook-events), not one kept in the page.
    const listed = (await (
      await fetch(`${stack.apiUrl}/console/api/webhook-events`, { headers: { authorization: `Bearer ${stack.demo!.consoleKey}` } })
    ).json()) as { data: string[] };
    expect(listed.data).toContain('schedule.run_completed');
    const boxes = () => page.locator('#wh-create input[type="checkbox"]').evaluateAll((bs) => bs.map((b) => (b as HTMLInputElement).value));
    await expect.poll(boxes).toEqual(listed.data);
    expect(
      await page.evaluate(() => performance.getEntriesByType('resource').some((e) => e.name.endsWith('/console/api/webhook-events'))),
    ).toBe(true);
    // A URL the api refuses (user:password@ would be stored and shown in clear): the reason shows under the field.
    await page.fill('#wh-url', 'http://user:pw@127.0.0.1:9/hooks');
    await page.click('#wh-create button[type="submit"]');
    await expect.poll(() => page.locator('#wh-url-error').textContent()).toContain('must not carry user:password@');
    expect(await page.locator('#wh-url').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#wh-secret').isVisible()).toBe(false);
    expectedFailure(/^400 .*\/webhooks$/);
    await page.fill('#wh-url', receiverUrl);
    expect(await page.locator('#wh-url-error').isVisible()).toBe(false);
    // Only the schedule's outcomes (a scheduled run's turn would send turn.succeeded too).
    for (const e of ['turn.succeeded', 'turn.failed', 'turn.stopped', 'turn.human_input_required'])
      await page.locator(`#wh-create input[value="${e}"]`).uncheck();
    await page.click('#wh-create button[type="submit"]');
    const secret = ((await page.locator('#wh-secret code').textContent({ timeout: 10_000 })) ?? '').trim();
    expect(secret).toMatch(/^whsec_/);
    const hook = page.locator('#wh-table tbody tr', { hasText: receiverUrl });
    await expect.poll(() => hook.locator('td').nth(1).textContent()).toBe('schedule.run_completed, schedule.run_failed');
    expect(await hook.textContent()).not.toContain(secret);
    // Shown once: coming back to the screen, it is gone.
    await screen('schedules');
    await screen('webhooks');
    expect(await page.locator('#wh-secret').isVisible()).toBe(false);

    // A schedule run now: its turn ends, the schedule's list shows it, and the webhook gets schedule.run_completed.
    await screen('schedules');
    const hourly = page.locator('#sc-table tbody tr[data-name="Hourly check"]');
    await hourly.locator('button:has-text("Run now")').click();
    await expect.poll(status).toBe('Hourly check runs now.');
    await expect
      .poll(
        async () => {
          await screen('schedules');
          return hourly
            .locator('.last-run .badge')
            .textContent({ timeout: 2_000 })
            .catch(() => '');
        },
        { timeout: 30_000 },
      )
      .toBe('succeeded');
    await screen('webhooks');
    await hook.locator('button:has-text("Deliveries")').click();
    const first = page.locator('#wh-deliveries tbody tr').first();
    await expect
      .poll(
        async () => {
          await page.click('#wh-log-refresh');
          return first.getAttribute('data-status', { timeout: 2_000 }).catch(() => '');
        },
        { timeout: 30_000 },
      )
      .toBe('succeeded');
    expect(await first.locator('td').first().textContent()).toBe('schedule.run_completed');
    expect(await first.locator('.attempts').textContent()).toBe('2');
    expect(await first.locator('td').nth(3).textContent()).toBe('200');
    // The receiver: a 500, then the same event again, signed with the secret the page showed.
    expect(received).toHaveLength(2);
    for (const r of received) expect(verifySignature(secret, r.body, String(r.headers['dify-signature']))).toBe(true);
    const eventId = received[0]!.headers['dify-event-id'];
    expect(received[1]!.headers['dify-event-id']).toBe(eventId);
    expect(JSON.parse(received[1]!.body)).toMatchObject({ event: 'schedule.run_completed', data: { status: 'succeeded' } });
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, 'studio-webhooks-desktop.png');

    // Redeliver: a new delivery of the same event (same id), accepted at the first attempt.
    await first.locator('button:has-text("Redeliver")').click();
    await expect.poll(status).toBe('Redelivering schedule.run_completed.');
    await expect.poll(() => page.locator('#wh-log-pager').textContent()).toBe('2 deliveries');
    const redelivery = page.locator('#wh-deliveries tbody tr', { hasText: 'redelivery' });
    await expect
      .poll(
        async () => {
          await page.click('#wh-log-refresh');
          return redelivery.getAttribute('data-status', { timeout: 2_000 }).catch(() => '');
        },
        { timeout: 30_000 },
      )
      .toBe('succeeded');
    expect(await redelivery.locator('.attempts').textContent()).toBe('1');
    expect(received).toHaveLength(3);
    expect(received[2]!.headers['dify-event-id']).toBe(eventId);
    expect(verifySignature(secret, received[2]!.body, String(received[2]!.headers['dify-signature']))).toBe(true);

    // Off: no more events; delete: gone with its log.
    await hook.locator('button:has-text("Turn off")').click();
    await expect.poll(() => hook.locator('td').nth(2).textContent()).toBe('off');
    expect((await stack.db.appWebhook.findFirstOrThrow({ where: { url: receiverUrl } })).enabled).toBe(false);
    expect(failures).toEqual([]);
  }, 120_000);

  it('the phone layout: New agent, Schedules and Webhooks fit the screen with no serious axe violation', async () => {
    await checkPhoneScreens(page, ['new-app', 'schedules', 'webhooks'], 'studio');
    // The webhook's delete, on the phone.
    const hook = page.locator('#wh-table tbody tr', { hasText: receiverUrl });
    await hook.locator('button:has-text("Delete")').click();
    await expect.poll(() => hook.count()).toBe(0);
    expect(await stack.db.appWebhook.count({ where: { url: receiverUrl } })).toBe(0);
    expect(failures).toEqual([]);
  }, 60_000);
});
