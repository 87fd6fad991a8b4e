/**
 * Issue 17 L4: what end users (and app builders) write reaches the Temporal UI only as plain text. The
 * workflow's static summary and details are rendered as Markdown by the UI; the reviewer's `user` value
 * closed the backtick it sat in and the User Metadata tab rendered an image and a `javascript:` link.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markdownText } from '../../core/domain/turn-text.js';
import type { Stack } from '../../stack/start-stack.js';
import { workflowIdForMessage } from '../../workflows/definitions.js';
import { chat } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startTestStack('sec_l4');
});
afterAll(async () => stack?.stop());

const PUNCT = /[!-/:-@[-`{-~]/;

/** True when `s` has no Markdown syntax: every ASCII punctuation character is backslash-escaped, one line. */
function inert(s: string): boolean {
  if (/[\n\r]/.test(s)) return false;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\') {
      if (!PUNCT.test(s[i + 1] ?? '')) return false;
      i++;
    } else if (PUNCT.test(s[i]!)) return false;
  }
  return true;
}

const USER = 'x` ![pwned](http://evil.example/a.png) [click me](javascript:alert(1)) <img src=x onerror=alert(1)> `\n# Heading';
const QUERY = '**bold** [link](javascript:alert(2)) ![i](http://evil.example/b.png)';

describe('L4: Temporal UI metadata is plain text', () => {
  it('escapes the user and the query in the workflow’s static details and summary', async () => {
    const { frames } = await chat(stack.apiUrl, stack.demo!.apiKey, { query: QUERY, user: USER });
    const messageId = frames.at(-1)!.data.message_id as string;
    const desc = await stack.temporal.workflow.getHandle(workflowIdForMessage(messageId)).describe();
    const details = (await desc.staticDetails())!;
    const summary = (await desc.staticSummary())!;

    const userPart = details.slice(details.lastIndexOf('\n\nuser ') + '\n\nuser '.length);
    expect(inert(userPart), userPart).toBe(true);
    expect(userPart.replace(/\\(.)/g, '$1')).toBe(USER.replace(/\n/g, ' '));

    const queryPart = summary.slice(summary.indexOf(' · "', summary.indexOf(' · ') + 3) + 4, -1);
    expect(inert(queryPart), queryPart).toBe(true);
    expect(summary).not.toMatch(/[^\\]\[click|[^\\]!\[/);
  });

  it('markdownText keeps the text readable and bounded', () => {
    expect(markdownText('alice')).toBe('alice');
    expect(markdownText('a_b*c')).toBe('a\\_b\\*c');
    expect(markdownText('x'.repeat(1_000))).toHaveLength(200);
    expect(inert(markdownText('`]]><script>\u2028'))).toBe(true);
  });
});
