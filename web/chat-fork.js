// "Fork from here" under an answer (issue 42, LangGraph Studio's fork): a new conversation whose history is this one's
// thread up to that answer, answering from the session after it, with its own copy of the workspace
// (POST /v1/conversations/{id}/fork, docs/PROTOCOL.md §1; the studio's debugger: POST …/agent/debug/conversations/{id}/fork).
// On the chat page it is named after its source with "(fork)" (the api keeps the source's name) and opens at once,
// marked in the sidebar as the open conversation; in the studio's debugger it opens in the debugger.

/** Refusals the api explains: what the user can do about each (the api's message otherwise). */
const WHY = {
  conversation_busy: 'Wait for the answer in progress to end, then fork.',
  message_not_finished: 'That answer has not finished yet; fork once it has.',
  fork_point_waiting_for_human: 'That answer waits for your reply to its form: fork at the answer after it.',
  workspace_quota_exceeded: 'The agent’s files are too large to copy for a fork.',
};

/**
 * `ctx`: {state, say, actionButton, request(sourceId, messageId) → the fork, rename?(fork, name), opened(conversationId)}
 * — `request` asks the page's api for the fork, `rename` (when the page can) names it, `opened` shows the new
 * conversation. Returns `button(box)`: the action for an answer with a message id, or null.
 */
export function forkAction(ctx) {
  const { state, say, actionButton } = ctx;

  async function fork(box, button) {
    const source = state.conversationId;
    const messageId = box.dataset.messageId;
    if (!source || !messageId) return;
    button.disabled = true;
    say('Forking the conversation…');
    try {
      const forked = await ctx.request(source, messageId);
      let name = forked.name || 'Conversation';
      if (ctx.rename) {
        name = `${name.replace(/ \(fork\)$/, '')} (fork)`;
        // Told apart from its source in the list; the fork is there under its source's name should this fail.
        await ctx.rename(forked, name).catch(() => undefined);
      }
      await ctx.opened(forked.id);
      say(`Forked: “${name}” goes on from that answer.`);
    } catch (err) {
      if (err.status === 401) return;
      say(`Fork failed: ${WHY[err.code] || err.message}`);
    } finally {
      if (button.isConnected) button.disabled = false;
    }
  }

  return function button(box) {
    if (!box.dataset.messageId || box.classList.contains('queued')) return null;
    const b = actionButton('Fork from here', () => void fork(box, b), {
      cls: 'fork',
      icon: 'fork',
      text: 'Fork from here',
      title: 'A new conversation with this one’s messages up to this answer; it goes on from here',
    });
    return b;
  };
}
