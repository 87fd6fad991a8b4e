/**
 * What the studio's browser tests (test/e2e/studio*.test.ts) set up alike: Chromium with one page on the studio,
 * opened from the console-key link `npm start` prints (stack/links.ts), watched for failures, and logged in (the
 * agents list shows the active app); the phone-size pass over a list of screens (each fits 400 px, has no serious
 * axe violation, and gets a screenshot); and the loopback HTTP servers the tests stand up for the stack to call
 * (an OpenAPI tool's API, an MCP server, a webhook receiver).
 */
import type http from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import { pageLinks } from '../../stack/links.js';
import type { Stack } from '../../stack/start-stack.js';
import { axeViolations, launchChromium, screenshot, watchPage } from './browser.js';

export interface StudioPage {
  browser: Browser;
  page: Page;
}

/** The 404 every studio load may get: the agent has no build draft yet. */
export const noBuildDraftYet = (status: number, url: string): boolean => status === 404 && url.endsWith('/agent/build-draft');

/**
 * Launches Chromium and opens the studio of `stack`'s demo account in one page (desktop size unless `viewport`), its
 * 4xx/5xx responses, console and page errors recorded into `failures` (but those `expected` allows: by default only
 * the no-build-draft 404); returns once the agents list shows the active app.
 */
export async function openStudio(
  stack: Stack,
  failures: string[],
  opts: { viewport?: { width: number; height: number }; expected?: (status: number, url: string) => boolean } = {},
): Promise<StudioPage> {
  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: opts.viewport ?? { width: 1280, height: 900 } });
  watchPage(page, failures, opts.expected ?? noBuildDraftYet);
  await page.goto(pageLinks(stack).studio);
  await page.locator('#apps li.active').waitFor({ timeout: 30_000 });
  return { browser, page };
}

/** Opens one of the studio's screens from its navigation. */
export const studioScreen = (page: Page, name: string): Promise<void> => page.click(`#screens button[data-screen="${name}"]`);

/**
 * At a phone's size, each of `screens` in turn: it fits (no sideways scroll past 400 px), axe-core finds no serious
 * violation, and a screenshot `<prefix>-<screen>-phone.png` is kept.
 */
export async function checkPhoneScreens(page: Page, screens: string[], prefix: string): Promise<void> {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const name of screens) {
    await studioScreen(page, name);
    await page.waitForTimeout(300);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width, `${name} fits the phone`).toBeLessThanOrEqual(400);
    expect(await axeViolations(page), name).toEqual([]);
    await screenshot(page, `${prefix}-${name}-phone.png`);
  }
}

/** Starts `server` on a free loopback port; its base URL (http://127.0.0.1:<port>). */
export async function listenLocal(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** Closes `server` (if it was made), its open connections first. */
export async function closeLocal(server: http.Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}
