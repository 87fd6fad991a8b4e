// Suggested questions after an answer (issue 42, Dify's "follow-up" feature): under the latest finished answer, the
// three questions the api gives (GET /v1/messages/{id}/suggested on the chat page, the console's
// …/agent/debug/messages/{id}/suggested-questions in the studio's debugger; the api asks the agent's model once per
// message and keeps them), as buttons — a click (or Enter / Space) sends that question. Only while the feature is on
// (the chat page: GET /v1/parameters; the debugger: its draft) and no turn is in flight; a new message removes them.
import './chat-suggested.css';

/**
 * `ctx`: {questions(messageId) → Promise<string[]>, actionButton, send(query), enabled() → bool, latest() → the last
 * answer's box, busy() → a turn is in flight}. Returns {show(box), clear()}.
 */
export function suggestedAfterAnswer(ctx) {
  const { actionButton } = ctx;
  /** Bumped by every show/clear: an answer that arrives after a newer one (or a new message) is dropped. */
  let generation = 0;

  function clear() {
    generation++;
    for (const g of document.querySelectorAll('.follow-ups')) g.remove();
  }

  /** Whether `box` is a finished answer the questions may follow: the latest, with an id, not failed, stopped or queued. */
  const answered = (box) =>
    box?.isConnected &&
    box === ctx.latest() &&
    !!box.dataset.messageId &&
    !['pending', 'error', 'stopped', 'queued'].some((c) => box.classList.contains(c));

  async function show(box) {
    if (!ctx.enabled() || ctx.busy() || !answered(box)) return;
    clear();
    const mine = generation;
    let data;
    try {
      data = await ctx.questions(box.dataset.messageId);
    } catch {
      return; // a nicety: the page works the same without it (turned off since, the model refused, …)
    }
    if (mine !== generation || ctx.busy() || !answered(box) || !data?.length) return;
    const group = document.createElement('div');
    group.className = 'follow-ups';
    group.setAttribute('role', 'group');
    group.setAttribute('aria-label', 'Suggested questions');
    for (const question of data) {
      group.append(
        actionButton(
          question,
          () => {
            clear();
            ctx.send(question);
          },
          { cls: 'follow-up' },
        ),
      );
    }
    box.append(group);
  }

  return { show, clear };
}
