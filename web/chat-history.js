// The chat page's message list from history: a conversation's thread opened (GET /v1/messages — the newest branch,
// or the one through a message), its question and answer boxes with their thoughts, files, citations, rating and
// siblings, and the turns still open in it (waiting for a form, running or queued) re-attached in order; New chat
// empties it. Owns what the list shows of past messages; the streams are chat-turns.js'.

import { renderCitations } from './citations.js';
import { bytes, el, markAnswered, messageBox, paintAnswer, renderFile, renderThought } from './turn-view.js';

/**
 * `page`: {state, api, say, q, scroller, toBottom(force), detach(), closeDrawer(), setConversation(id),
 * renderConversations(), addActions(box), lastAgentBox(), followUps, runTurn(box, open, opts), eventsUrl(taskId),
 * showWelcome(), $}.
 */
export function chatHistory(page) {
  const { state, api, say, q, scroller, $ } = page;

  function addMessage(role, text) {
    document.querySelector('.welcome')?.remove();
    const m = messageBox(role, text);
    scroller.append(m);
    return m;
  }

  function userMessage(query, files = []) {
    const m = addMessage('user', query);
    if (files.length) {
      const list = el('div', 'sent-files');
      for (const f of files) {
        if (f.url && f.type === 'image') renderFile(m, f);
        else {
          const name = el(
            'span',
            '',
            `${f.name || f.filename || f.type || 'file'}${typeof f.size === 'number' ? ` (${bytes(f.size)})` : ''}`,
          );
          name.dataset.upload = f.id || '';
          list.append(name);
        }
      }
      if (list.childElementCount) m.append(list);
    }
    return m;
  }

  /** Shows a conversation's thread: the newest branch, or (`branch`) the one through that message. */
  async function openConversation(id, { branch } = {}) {
    page.detach();
    page.closeDrawer();
    page.setConversation(id);
    state.openForm = null;
    page.renderConversations();
    let data;
    try {
      const through = branch ? `&branch_id=${q(branch)}` : '';
      ({ data } = await api.get(`/v1/messages?conversation_id=${id}&user=${q(state.user)}&limit=100${through}`));
    } catch (err) {
      // Gone since (deleted in another tab): the tab starts a new chat instead.
      if (err.status === 404 && state.conversationId === id) newChat();
      else if (err.status !== 401) say(err.message);
      return;
    }
    if (state.conversationId !== id) return; // another conversation was opened meanwhile
    scroller.textContent = '';
    const boxes = new Map();
    for (const m of data) {
      // An ask_human continuation carries the paused message's query: show the question once.
      if (!m.resumed_from_message_id)
        userMessage(
          m.query,
          m.message_files.filter((f) => f.belongs_to === 'user'),
        );
      else if (boxes.has(m.resumed_from_message_id)) markAnswered(boxes.get(m.resumed_from_message_id));
      const box = addMessage('agent', m.answer);
      box.dataset.messageId = m.id;
      box.dataset.rating = m.feedback?.rating || '';
      // A regenerate from history sends the question's uploads again (message_files' upload_file_id).
      box._query = m.resumed_from_message_id
        ? undefined
        : {
            query: m.query,
            files: m.message_files
              .filter((f) => f.belongs_to === 'user' && f.upload_file_id)
              .map((f) => ({ id: f.upload_file_id, type: f.type, name: f.filename || f.type })),
          };
      box._parent = m.parent_message_id ?? null;
      box._siblings = m.sibling_ids || [];
      boxes.set(m.id, box);
      for (const t of m.agent_thoughts) renderThought(box, t);
      for (const f of m.message_files) if (f.belongs_to !== 'user') renderFile(box, f);
      renderCitations(box, m.retriever_resources);
      if (m.turn_status === 'stopped') box.classList.add('stopped');
      if (m.turn_status === 'failed' && m.error) {
        box.classList.add('error');
        box._error = m.error;
        paintAnswer(box);
      }
      page.addActions(box);
    }
    page.toBottom(true);
    // A turn still waiting for its form (or still running), and messages queued behind it: re-attach to show the form
    // or the rest of each answer, in order.
    const open = data.filter(
      (m) => ['paused', 'running', 'pending', 'queued'].includes(m.turn_status) && !data.some((n) => n.resumed_from_message_id === m.id),
    );
    if (!open.length) void page.followUps.show(page.lastAgentBox());
    for (const m of open) {
      const box = boxes.get(m.id);
      box._answer = '';
      paintAnswer(box);
      const queued = m.turn_status === 'queued';
      void page.runTurn(box, (signal) => api.request(page.eventsUrl(m.id), { signal }), {
        waiting: queued,
        queued,
        taskId: queued ? m.id : '',
      });
    }
  }

  function newChat() {
    page.detach();
    page.closeDrawer();
    page.setConversation('');
    state.openForm = null;
    page.showWelcome();
    page.renderConversations();
    $('query').focus();
  }

  return { addMessage, userMessage, openConversation, newChat };
}
