/**
 * What the browser tests (test/e2e/*) share: Debian's Chromium (or CHROMIUM_PATH) driven by playwright-core, a page
 * watched for 4xx/5xx responses, console errors and uncaught errors, axe-core's serious and critical violations, and
 * screenshots kept as CI artifacts (test-results/screenshots). Without Chromium a file is skipped with a hint (CI fails).
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect, inject } from 'vitest';
import { screenshotDir } from './artifacts.js';

export const chromiumPath = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p) => p && fs.existsSync(p),
);
if (!chromiumPath) {
  if (process.env.CI) throw new Error('Chromium is required in CI: apt-get install -y chromium (see .ci/run)');
  console.warn('[e2e] Chromium not found: install it (apt-get install chromium) or set CHROMIUM_PATH to run the browser test.');
}

const AXE = fs.readFileSync(path.join(import.meta.dirname, '../../node_modules/axe-core/axe.min.js'), 'utf8');

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Records into `failures` every response of 400 or more (but those `expected(status, url)` allows), console error and
 * uncaught page error; accepts every confirm() dialog.
 */
export function watchPage(p: Page, failures: string[], expected: (status: number, url: string) => boolean = () => false): void {
  p.on('response', (r) => {
    if (r.status() >= 400 && !expected(r.status(), r.url())) failures.push(`${r.status()} ${r.url()}`);
  });
  p.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) failures.push(`console: ${m.text()}`);
  });
  p.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  p.on('dialog', (d) => void d.accept());
}

/** A screenshot under the run's data dir, copied to the artifacts directory. */
export async function screenshot(p: Page, name: string, fullPage = true): Promise<void> {
  const file = path.join(inject('testDataDir'), name);
  await p.screenshot({ path: file, fullPage });
  expect(fs.statSync(file).size).toBeGreaterThan(1000);
  fs.mkdirSync(screenshotDir(), { recursive: true });
  fs.copyFileSync(file, path.join(screenshotDir(), name));
}

/** axe-core's serious and critical violations of the page (or of the element `within` selects). */
export async function axeViolations(p: Page, within?: string): Promise<string[]> {
  await p.evaluate(AXE);
  const result = await p.evaluate(async (within) => {
    const axe = (
      window as unknown as {
        axe: {
          run: (ctx: unknown, o: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe;
    const r = await axe.run(within ? document.querySelector(within) : document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  }, within);
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.targets.join(', ')}`);
}
