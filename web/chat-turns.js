// The chat page's running turns (the stream view): `state.turn` is the one running, `state.waiting` those accepted
// behind it (multitask), oldest first. A turn streams into its box (turn-view.js' consumeTurn, re-attaching by
// Last-Event-ID); Stop works from the first byte (a stop asked for before the task id is known is sent when it
// arrives); detach lets go of the streams (New chat, another conversation) while the turns go on on the server. A turn
// owns its conversation id: a detached turn never changes the page's. Owns `state.turn` and `state.waiting`.

import { showKeyError } from './chat-key.js';
import { actionButton, consumeTurn, el, paintAnswer } from './turn-view.js';

/**
 * `page`: {state, api, $, say, q, renderBusy(), setConversation(id), loadConversations(), conversations, followUps,
 * showForm(box, form), useKey(key), addActions(box), showSentImages(question, turn), conversationOf(t),
 * showPlace(turn, position), watchQueue(), readQueue(conversationId), stopQueued(turn)}.
 */
export function chatTurns(page) {
  const { state, api, $, say, q } = page;

  const eventsUrl = (taskId) => `/v1/chat-messages/${taskId}/events?user=${q(state.user)}`;

  /**
   * Runs one turn into `box`: `open(signal)` is the first response (the POST's stream or the events of a turn still
   * running).
   */
  async function runTurn(box, open, { query, files, waiting = false, queued = false, taskId = '', question = null } = {}) {
    const turn = { abort: new AbortController(), taskId, stopRequested: false, box, conversationId: state.conversationId, query };
    turn.sentFiles = files;
    // `waiting`: accepted behind the turn in flight (multitask); `queued` says so in its box (enqueue).
    if (waiting) state.waiting.push(turn);
    else state.turn = turn;
    box.classList.add('pending');
    if (queued) {
      box.classList.add('queued');
      const note = el('div', 'queued-note');
      note.append(
        el('span', 'queue-place', 'Queued: answered after the messages before it.'),
        actionButton('Stop', () => page.stopQueued(turn), { cls: 'stop-queued', aria: 'Stop this queued message before it runs' }),
      );
      box.querySelector('.thoughts').before(note);
      if (taskId) box.dataset.messageId = taskId;
      void page.watchQueue();
    }
    page.renderBusy();
    const current = () => state.turn === turn;
    const unqueue = () => {
      box.classList.remove('queued');
      box.querySelector('.queued-note')?.remove();
    };
    /** Its first event: a waiting message's turn has started, it is the running one now (unless it was stopped while it waited: it ends without running). */
    const started = () => {
      if (!state.waiting.includes(turn)) return;
      state.waiting = state.waiting.filter((t) => t !== turn);
      unqueue();
      if (!turn.stopRequested || !state.turn) state.turn = turn;
      page.renderBusy();
    };
    try {
      const res = await open(turn.abort.signal);
      const result = await consumeTurn(box, res, {
        signal: turn.abort.signal,
        // Accepted behind the turn in flight: its id (what its Stop stops) and place in line, before any turn event.
        onQueued: (d) => {
          if (!turn.taskId) {
            turn.taskId = d.task_id;
            box.dataset.messageId = d.task_id;
            if (turn.stopRequested) void sendStop(turn);
          }
          if (!turn.conversationId) turn.conversationId = d.conversation_id;
          page.showPlace(turn, d.position);
        },
        onTask: (id) => {
          started();
          if (turn.taskId) return;
          if (turn.conversationId) page.conversations.settle(turn.conversationId, id);
          void page.showSentImages(question, turn);
          turn.taskId = id;
          box.dataset.messageId = id;
          if (turn.stopRequested) void sendStop(turn);
        },
        onConversation: (id) => {
          if (turn.conversationId) return;
          turn.conversationId = id;
          if (current()) {
            page.setConversation(id);
            void page.loadConversations();
          }
        },
        onForm: page.showForm,
        // The key was revoked while this answer streamed (issue 47): the page becomes the key's full-page error, as a 401 does.
        onKeyRevoked: () => showKeyError(true, page.useKey),
        reattach: (lastId) =>
          turn.taskId
            ? api.request(eventsUrl(turn.taskId), { headers: { 'last-event-id': String(lastId) }, signal: turn.abort.signal })
            : Promise.reject(new Error('The stream broke before the turn started.')),
      });
      if (!result.aborted && current()) say('');
    } catch (err) {
      if (err.status === 401) {
        // The key stopped working (the page shows why): the message was not sent, and what was typed comes back.
        const question = box.previousElementSibling;
        if (query !== undefined && question?.classList.contains('user')) question.remove();
        box.remove();
        if (query !== undefined && !$('query').value) $('query').value = query;
      } else if (err.name !== 'AbortError') {
        box.classList.add('error');
        box._error = err.message;
        paintAnswer(box);
        if (err.code === 'conversation_waiting_for_human') say('Answer the open form first.');
        else say(err.message);
      }
    } finally {
      box.classList.remove('pending');
      unqueue();
      if (query !== undefined) box._query = { query, files };
      if (box.isConnected) page.addActions(box);
      // One that never started (refused, detached) leaves the queue.
      const wasWaiting = state.waiting.includes(turn);
      state.waiting = state.waiting.filter((t) => t !== turn);
      if (current() || wasWaiting) {
        if (current()) state.turn = null;
        page.renderBusy();
        if (turn.conversationId && !state.openForm) page.conversations.settle(turn.conversationId, null);
        void page.loadConversations();
      }
      void page.followUps.show(box);
    }
  }

  /** Ends the running stream's hold on the page (New chat, another conversation): the turn goes on on the server. */
  function detach() {
    const turns = [state.turn, ...state.waiting].filter(Boolean);
    if (!turns.length) return;
    state.turn = null;
    state.waiting = [];
    for (const t of turns) t.abort.abort();
    page.renderBusy();
    say('');
  }

  async function sendStop(turn) {
    try {
      await api.post(`/v1/chat-messages/${turn.taskId}/stop`, { user: state.user });
      turn.box.classList.add('stopped');
      // A queued one left the line: the places of those after it, now.
      if (turn.box.classList.contains('queued')) void page.readQueue(page.conversationOf(turn)).catch(() => undefined);
    } catch (err) {
      say(`Stop failed: ${err.message}`);
    }
  }

  /** The composer's Stop: the running turn (not those waiting behind it, which have their own). */
  function stop() {
    const turn = state.turn;
    if (!turn) return;
    turn.stopRequested = true;
    page.renderBusy();
    if (turn.taskId) void sendStop(turn);
    // The stopped turn ends its stream with message_end; should that not come, the page lets go after 10 s.
    setTimeout(() => {
      if (state.turn === turn) {
        detach();
        say('Stopped (the stream did not end; the conversation shows the rest).');
      }
    }, 10_000);
  }

  return { eventsUrl, runTurn, detach, sendStop, stop };
}
