// The chat page's composer: what sending does and when it may. While a turn runs, a follow-up follows the app's
// multitask strategy (issue 35; GET /v1/parameters' `multitask_strategy`, sent explicitly with every message):
// `reject` (Dify's) — Enter and Send do nothing until the answer ends; otherwise the composer stays usable and `send`
// posts at once: `enqueue` shows the follow-up as queued until its turn starts (chat-queue.js), `interrupt` marks the
// running answer stopped (its part so far stays) and streams the new one after it, `rollback` takes the running
// exchange out of the view (the API hides it from history too) and streams the new one. An open ask_human form holds
// the composer until it is answered. Owns the composer's busy state, the send and the form's submission.

import { markAnswered, renderForm, wireComposer } from './turn-view.js';

const FOLLOW_UP = {
  enqueue: 'Queue a follow-up',
  interrupt: 'Interrupt with a message',
  rollback: 'Replace this exchange',
};

/**
 * `page`: {state, api, $, say, toBottom(force), addMessage(role, text), userMessage(query, files), renderFiles(),
 * runTurn(box, open, opts), detach(), stop(), eventsUrl(taskId), followUps}.
 */
export function chatComposer(page) {
  const { state, api, $, say } = page;

  const uploading = () => state.files.some((f) => !f.id && !f.error);
  /** The app's multitask strategy (GET /v1/parameters); `reject` until it is known. */
  const strategy = () => state.app?.multitask || 'reject';
  const inFlight = () => !!state.turn || state.waiting.length > 0;

  /** The one busy state: Send, Stop, the body's classes, the placeholder and the status line. */
  function renderBusy() {
    const busy = inFlight();
    const multi = strategy() !== 'reject';
    $('send').disabled = (busy && !multi) || uploading();
    $('stop').disabled = !state.turn;
    document.body.classList.toggle('busy', busy);
    document.body.classList.toggle('multitask', multi);
    $('query').placeholder = busy && multi ? FOLLOW_UP[strategy()] : 'Message the agent';
    if (busy) say(!state.turn ? 'Your message waits its turn…' : state.turn.stopRequested ? 'Stopping…' : 'The agent is working…');
  }

  /** POST /v1/chat-messages, streaming: a new message, or (with `parent`) a regenerated sibling answer. */
  function sendChat({ query, conversationId, files, strategy: how, parent }, signal) {
    return api.request('/v1/chat-messages', {
      json: {
        inputs: {},
        query,
        user: state.user,
        response_mode: 'streaming',
        conversation_id: conversationId || undefined,
        ...(parent ? { parent_message_id: parent } : {}),
        files: (files || []).map((f) => ({ type: f.type, transfer_method: 'local_file', upload_file_id: f.id })),
        multitask_strategy: how,
      },
      signal,
    });
  }

  /** Renders an ask_human form whose submission continues the turn in a new agent message. */
  function showForm(box, form) {
    // Until it is answered the conversation waits for it: a message typed meanwhile stays in the composer (send()).
    state.openForm = { conversationId: state.conversationId, box };
    renderForm(box, form, async (inputs, action) => {
      state.openForm = null;
      if (state.turn) page.detach();
      const next = page.addMessage('agent', '');
      await page.runTurn(next, async (signal) => {
        const cont = await api.post(`/v1/form/human_input/${form.form_token}`, { inputs, action, user: state.user }, { signal });
        // The question's card says so at once (as the history does after a reload).
        markAnswered(box);
        return api.request(page.eventsUrl(cont.task_id), { signal });
      });
    });
    page.toBottom(true);
  }

  function send(query, files = state.files.filter((f) => f.id)) {
    if (state.openForm && state.openForm.conversationId === state.conversationId && state.openForm.box.isConnected) {
      say('Answer the question above first (or start a New chat).');
      state.openForm.box.querySelector('form.form textarea, form.form select')?.focus({ preventScroll: true });
      return false;
    }
    const busy = inFlight();
    const how = strategy();
    if (busy && how === 'reject') {
      say('The agent is still answering: wait for it, or Stop it.');
      return false;
    }
    // The first turn of a new chat names its conversation with its first event: a follow-up needs that id.
    if (busy && !state.conversationId) {
      say('Wait a moment: the conversation is still starting.');
      return false;
    }
    if (uploading()) {
      say('Wait for the upload to finish.');
      return false;
    }
    page.followUps.clear();
    const running = busy ? state.turn : null;
    if (running && how === 'interrupt') {
      // The API stops it (as Stop would): what it said so far stays, marked stopped; its stream ends by itself.
      running.stopRequested = true;
      running.box.classList.add('stopped');
    } else if (running && how === 'rollback') {
      // The API stops it and hides it from the conversation: its question and answer leave the view.
      const question = running.box.previousElementSibling;
      if (question?.classList.contains('user')) question.remove();
      running.box.remove();
      state.turn = null;
      running.abort.abort();
    }
    const sent = files.map((f) => ({ id: f.id, name: f.name, type: f.type }));
    const question = page.userMessage(query, sent);
    state.files = [];
    page.renderFiles();
    const box = page.addMessage('agent', '');
    page.toBottom(true);
    const conversationId = state.conversationId;
    void page.runTurn(box, (signal) => sendChat({ query, conversationId, files: sent, strategy: how }, signal), {
      query,
      files: sent,
      waiting: busy,
      queued: busy && how === 'enqueue',
      question,
    });
    return true;
  }

  wireComposer($('composer'), $('query'), (text) => !!send(text));
  $('stop').addEventListener('click', () => page.stop());

  return { strategy, inFlight, renderBusy, sendChat, showForm, send };
}
