/**
 * The studio's webhook event checkboxes come from the api (GET /console/api/webhook-events, issue 46: the page kept a
 * hand copy of WEBHOOK_EVENTS that could drift from what the create accepts). No page source spells an event name as a
 * string literal, so a new or renamed event cannot be missing from, or stale in, the page's list;
 * test/e2e/studio-automation.test.ts checks that the checkboxes are the api's list, read from that route.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { WEBHOOK_EVENTS } from '../../api/console/webhooks.js';
import { projectRoot } from '../../core/platform/project-root.js';

const WEB = path.join(projectRoot(import.meta.url), 'web');

function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sources(path.join(dir, e.name)) : /\.(m?js|html)$/.test(e.name) ? [path.join(dir, e.name)] : []));
}

describe('the studio keeps no copy of the webhook events', () => {
  it('no page source spells an event name in quotes', () => {
    const files = sources(WEB);
    expect(files.map((f) => path.basename(f))).toContain('studio-webhooks.js');
    const copies = files.flatMap((f) => {
      const text = fs.readFileSync(f, 'utf8');
      return WEBHOOK_EVENTS.filter((e) => new RegExp(`['"\`]${e.replace('.', '\\.')}['"\`]`).test(text)).map(
        (e) => `${path.relative(WEB, f)}: ${e}`,
      );
    });
    expect(copies).toEqual([]);
  });
});
