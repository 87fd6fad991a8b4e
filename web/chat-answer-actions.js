// The bar under each answer: Copy, like/dislike (POST /v1/messages/{id}/feedbacks), Regenerate on the last answer,
// Fork from here (chat-fork.js) and, between sibling answers, arrows. Regenerate (issue 35 item 2) posts the question
// again under the parent of the answer it replaces (Dify's parent_message_id): a sibling answer; the arrows show the
// thread through each sibling (their `sibling_ids`; GET /v1/messages?branch_id=). Owns the actions bar.

import { copyText } from './lib/markdown.js';
import { actionButton, el, messageBox } from './turn-view.js';

/** Dify's parent_message_id for a thread's root (regenerating the first answer). */
const UUID_NIL = '00000000-0000-0000-0000-000000000000';

/**
 * `page`: {state, api, say, q, scroller, forkButton(box), openConversation(id, {branch}), inFlight(), strategy(),
 * runTurn(box, open, opts), sendChat(body, signal)}.
 */
export function chatAnswerActions(page) {
  const { state, api, say, q, scroller } = page;

  const lastAgentBox = () => [...scroller.querySelectorAll('.msg.agent')].pop();

  /** Copy, like/dislike and (on the last answer) ask again, under an answer that has a message id. */
  function addActions(box) {
    box.querySelector('.actions')?.remove();
    const bar = el('div', 'actions');
    bar.append(
      actionButton(
        'Copy',
        async (ev) => {
          const label = ev.currentTarget.querySelector('span');
          const ok = await copyText(box._answer || box.querySelector('.text').textContent);
          label.textContent = ok ? 'Copied' : 'Copy failed';
          setTimeout(() => (label.textContent = 'Copy'), 1500);
        },
        { cls: 'copy-answer', icon: 'copy', text: 'Copy' },
      ),
    );
    const id = box.dataset.messageId;
    if (id) {
      for (const rating of ['like', 'dislike']) {
        const b = actionButton(rating, () => void rate(box, rating), {
          cls: `rate ${rating}`,
          icon: rating,
          aria: rating === 'like' ? 'Good answer' : 'Bad answer',
        });
        b.title = rating === 'like' ? 'Good answer' : 'Bad answer';
        b.setAttribute('aria-pressed', String(box.dataset.rating === rating));
        bar.append(b);
      }
    }
    if (box._query && id) {
      bar.append(
        actionButton('Regenerate', () => void regenerate(box), {
          cls: 'again',
          icon: 'again',
          text: 'Regenerate',
          title: 'Answers the same question again, as a sibling of this answer (the arrows switch between them)',
        }),
      );
    }
    const fork = page.forkButton(box);
    if (fork) bar.append(fork);
    const siblings = box._siblings || [];
    if (siblings.length > 1) {
      const at = siblings.indexOf(id);
      const nav = el('span', 'siblings');
      const go = (to) => () => void page.openConversation(state.conversationId, { branch: siblings[to] });
      const prev = actionButton('‹', go(at - 1), { cls: 'sibling prev', aria: 'Previous answer' });
      prev.disabled = at <= 0;
      const next = actionButton('›', go(at + 1), { cls: 'sibling next', aria: 'Next answer' });
      next.disabled = at >= siblings.length - 1;
      nav.append(prev, el('span', 'sibling-at', `${at + 1} / ${siblings.length}`), next);
      bar.prepend(nav);
    }
    box.append(bar);
    // Only the last answer offers to regenerate.
    for (const b of scroller.querySelectorAll('.msg.agent .again')) if (b.closest('.msg') !== lastAgentBox()) b.remove();
  }

  async function rate(box, rating) {
    const next = box.dataset.rating === rating ? null : rating;
    try {
      await api.post(`/v1/messages/${box.dataset.messageId}/feedbacks`, { rating: next, user: state.user });
      box.dataset.rating = next || '';
      for (const b of box.querySelectorAll('.rate')) b.setAttribute('aria-pressed', String(b.classList.contains(next || '-')));
      say(next ? 'Thanks for the feedback.' : 'Feedback removed.');
    } catch (err) {
      say(`Feedback failed: ${err.message}`);
    }
  }

  /**
   * Regenerate: the answer's question again under the answer's parent (UUID_NIL for the first one), into a new box in
   * its place; then the conversation shows the thread through the new answer, with arrows to its siblings.
   */
  async function regenerate(box) {
    if (page.inFlight() || !box._query || !box.dataset.messageId) return;
    const conversationId = state.conversationId;
    let parent = box._parent;
    if (parent === undefined) {
      // An answer streamed in this page: its parent from the thread the API keeps.
      try {
        const { data } = await api.get(
          `/v1/messages?conversation_id=${conversationId}&user=${q(state.user)}&branch_id=${box.dataset.messageId}&limit=100`,
        );
        parent = data.find((m) => m.id === box.dataset.messageId)?.parent_message_id ?? null;
      } catch (err) {
        say(err.message);
        return;
      }
    }
    const { query, files } = box._query;
    const next = messageBox('agent', '');
    box.replaceWith(next);
    await page.runTurn(
      next,
      (signal) => page.sendChat({ query, conversationId, files, strategy: page.strategy(), parent: parent || UUID_NIL }, signal),
      {
        query,
        files,
      },
    );
    const newId = next.dataset.messageId || '';
    if (newId && state.conversationId === conversationId && !page.inFlight())
      await page.openConversation(conversationId, { branch: newId });
  }

  return { addActions, lastAgentBox };
}
