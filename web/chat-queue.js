// The chat page's queued messages (multitask `enqueue`, issue 35): each waiting box's place in line — from its
// stream's first frame, `message_queued`, then from the conversation's history every 2 s while anything waits (the
// places move as the ones before run or are stopped, from any tab) — and its own Stop before its turn. Owns the
// queued boxes' notes; the turns themselves are chat-turns.js'.

const ordinal = (n) => `${n}${n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th'}`;

/** `page`: {state, api, q, sendStop(turn)}. */
export function chatQueue(page) {
  const { state, api, q } = page;
  let watching = false;
  /** A waiting turn's conversation: the page's when it was sent before the first answer named it. */
  const conversationOf = (t) => t.conversationId || state.conversationId;

  /** A queued box's place in line (1: next), as its stream or the history last said. */
  function showPlace(turn, position) {
    const place = turn.box.querySelector('.queue-place');
    if (!place || turn.stopRequested || !position) return;
    turn.box.dataset.queuePosition = String(position);
    place.textContent = position === 1 ? 'Queued: next in line.' : `Queued: ${ordinal(position)} in line.`;
  }

  /**
   * While messages wait in line: every 2 s, their places from the conversation's history. Each box's id is its
   * stream's own (`message_queued`): nothing here guesses which message is whose.
   */
  async function watchQueue() {
    if (watching) return;
    watching = true;
    try {
      while (state.waiting.some((t) => t.box.classList.contains('queued'))) {
        await new Promise((r) => setTimeout(r, 2000));
        const convs = [
          ...new Set(
            state.waiting
              .filter((t) => t.taskId)
              .map(conversationOf)
              .filter(Boolean),
          ),
        ];
        for (const c of convs) await readQueue(c).catch(() => undefined);
      }
    } finally {
      watching = false;
    }
  }

  async function readQueue(conversationId) {
    const { data } = await api.get(`/v1/messages?conversation_id=${q(conversationId)}&user=${q(state.user)}&limit=100`);
    for (const t of state.waiting) {
      const m = t.taskId && conversationOf(t) === conversationId ? data.find((x) => x.id === t.taskId) : null;
      if (m?.turn_status === 'queued') showPlace(t, m.queue_position);
    }
  }

  /** Stops a message still waiting in line: it ends without running (sent once its id is known). */
  function stopQueued(turn) {
    if (turn.stopRequested) return;
    turn.stopRequested = true;
    const place = turn.box.querySelector('.queue-place');
    if (place) place.textContent = 'Stopping before its turn…';
    turn.box.querySelector('.stop-queued')?.setAttribute('disabled', '');
    // Before its id is known (its stream's first frame is on the way), the Stop is sent when it arrives.
    if (turn.taskId) void page.sendStop(turn);
  }

  return { conversationOf, showPlace, watchQueue, readQueue, stopQueued };
}
