/** Text a turn shows about itself: a conversation's default name and one-line Markdown-safe summaries (api and activities share them). */

export function conversationName(query: string): string {
  const oneLine = query.replace(/\s+/g, ' ').trim();
  return oneLine.length <= 40 ? oneLine : `${oneLine.slice(0, 39)}…`;
}

/**
 * `text` as Markdown that renders as exactly that text: one line (control characters and line breaks become
 * spaces), at most `max` characters, every ASCII punctuation character backslash-escaped (CommonMark allows
 * escaping any of them), so no emphasis, code span, link, image, autolink, HTML or heading can start.
 */
export function markdownText(text: string, max = 200): string {
  const line = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').slice(0, max);
  return line.replace(/[!-/:-@[-`{-~]/g, (c) => `\\${c}`);
}
