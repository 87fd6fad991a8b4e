/** Text a turn shows about itself: a conversation's default name and one-line Markdown-safe summaries (api and activities share them). */

/** `query` on one line, at most 40 characters (a turn's workflow summary quotes it so). */
export function conversationName(query: string): string {
  const oneLine = query.replace(/\s+/g, ' ').trim();
  return oneLine.length <= 40 ? oneLine : `${oneLine.slice(0, 39)}…`;
}

/**
 * A new conversation's name from its first message (issue 42): what the message says, not how it was typed — a
 * leading slash command (a chat's trigger: `/ask`, `/slow 200`) and its numeric argument left out, only the first
 * paragraph, Markdown's markup taken off (heading and quote markers, list bullets, emphasis, code spans and fences,
 * a link's or image's URL, HTML tags), then on one line and at most 40 characters like {@link conversationName}.
 * A message that is nothing but such markup keeps its raw text.
 */
export function conversationTitle(query: string): string {
  let text = query.trim().replace(/^(?:\/[a-z][\w-]*(?:[ \t]+\d+(?:\.\d+)?)?(?:\s+|$))+/i, '');
  // The first paragraph that is not a code fence.
  text = text.split(/\n\s*\n/).find((p) => p.trim() && !/^\s*(```|~~~)/.test(p)) ?? '';
  text = text
    .split('\n')
    .map((line) => line.replace(/^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+\[[ xX]\]\s+|[-*+]\s+|\d+[.)]\s+)/, '').replace(/\s+#+\s*$/, ''))
    .join(' ')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<\/?[a-z][^>]*>/gi, '')
    .replace(/(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1/g, '$2')
    .replace(/(^|[^\w*])[*_](?=\S)(.+?)(?<=\S)[*_](?=[^\w*]|$)/g, '$1$2')
    .replace(/`+([^`]*)`+/g, '$1');
  return conversationName(text.trim() ? text : query);
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
