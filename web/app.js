// The chat page: a Dify service-API client in the browser (the app key comes from the URL fragment #key=... — never
// sent to a server — or the settings box, and stays in this tab's sessionStorage).
//
// One running turn (`state.turn`): Stop works from the first byte (a stop asked for before the task id is known is
// sent when it arrives), and New chat / opening another conversation detaches the running stream first (the turn goes
// on on the server; its conversation shows it when opened), so the next message never lands in the old conversation. The view follows a streaming answer unless the reader scrolled
// up. Answers are sanitised Markdown with the agent's files as attachments (turn-view.js); uploads, feedback, copy,
// regenerate, rename and delete use the service API (docs/PROTOCOL.md §1). Regenerate (issue 35 item 2) posts the
// question again under the parent of the answer it replaces (Dify's parent_message_id): a sibling answer; arrows
// between siblings (their `sibling_ids`) show the thread through each (GET /v1/messages?branch_id=).
//
// While a turn runs, what a follow-up does is the app's multitask strategy (issue 35; GET /v1/parameters'
// `multitask_strategy`, sent explicitly with every message): `reject` (Dify's) — Enter and Send do nothing until the
// answer ends; otherwise the composer stays usable and `send` posts at once: `enqueue` shows the follow-up as queued
// (`state.waiting`) until its turn starts, with its place in line and its own Stop: its stream's first frame,
// `message_queued`, names its id and place (exact, whatever other tabs send), watchQueue refreshes the places from the
// history while anything waits, and a queued message stopped before its turn ends without running); `interrupt` marks the running answer stopped
// (its part so far stays) and streams the new one after it; `rollback` takes the running exchange out of the view
// (the API hides it from history too) and streams the new one.

import { conversationList } from './chat-conversations.js';
import { forkAction } from './chat-fork.js';
import { suggestedAfterAnswer } from './chat-suggested.js';
import { renderCitations } from './citations.js';
import { onPastedKey, readKey, showKeyError, storeKey } from './chat-key.js';
import { createApi } from './lib/api.js';
import { copyText } from './lib/markdown.js';
import {
  actionButton,
  bytes,
  consumeTurn,
  el,
  markAnswered,
  messageBox,
  paintAnswer,
  renderFile,
  renderForm,
  renderThought,
  wireComposer,
} from './turn-view.js';

const $ = (id) => document.getElementById(id);
const state = {
  key: '',
  user: '',
  conversationId: '',
  /** The running turn: {abort, taskId, stopRequested, box, conversationId}; null when idle. */
  turn: null,
  /** Turns accepted behind it (multitask strategies), oldest first: each starts (becomes `turn`) with its first event. */
  waiting: [],
  app: null,
  /** Files picked for the next message: {localId, name, type, id?, error?}. */
  files: [],
  conversations: [],
  /** The ask_human form waiting in the open conversation: {conversationId, form}; null when none. */
  openForm: null,
};
// A 401 anywhere (the key revoked or mistyped): the page becomes the key's full-page error (chat-key.js).
const api = createApi({ key: () => state.key, onUnauthorized: () => showKeyError(true, useKey) });
const q = (s) => encodeURIComponent(s);
/** Dify's parent_message_id for a thread's root (regenerating the first answer). */
const UUID_NIL = '00000000-0000-0000-0000-000000000000';

// --- settings --------------------------------------------------------------------------------------------------

/** The conversation open in this tab survives a reload (issue 42 problem 2): a turn running in it is re-attached. */
const OPEN_CONVERSATION = 'agent-chat-conversation';
function setConversation(id) {
  state.conversationId = id;
  if (id) sessionStorage.setItem(OPEN_CONVERSATION, id);
  else sessionStorage.removeItem(OPEN_CONVERSATION);
}

function loadSettings() {
  state.key = readKey();
  state.user = localStorage.getItem('agent-chat-user') || `web-${Math.random().toString(36).slice(2, 10)}`;
  localStorage.setItem('agent-chat-user', state.user);
  $('api-key').value = state.key;
  $('user').value = state.user;
  if (!state.key) $('settings').open = true;
}

const say = (text) => ($('status').textContent = text);

// --- scrolling: follow the stream unless the reader scrolled up --------------------------------------------------

const scroller = $('messages');
let follow = true;
let lastTop = 0;
const atBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
// The reader's own moves up release the view at once (a smooth wheel scroll's first event is still near the bottom).
const release = () => {
  follow = false;
};
scroller.addEventListener('wheel', (ev) => ev.deltaY < 0 && release(), { passive: true });
scroller.addEventListener('touchmove', release, { passive: true });
scroller.addEventListener('keydown', (ev) => ['PageUp', 'ArrowUp', 'Home'].includes(ev.key) && release());
scroller.addEventListener('scroll', () => {
  // A move up away from the end (the scrollbar dragged) releases too; reaching the end again resumes following.
  if (scroller.scrollTop < lastTop - 2 && !atBottom()) follow = false;
  else if (scroller.scrollTop >= lastTop && atBottom()) follow = true;
  lastTop = scroller.scrollTop;
  $('to-latest').hidden = follow || atBottom();
});
function toBottom(force = false) {
  if (force) follow = true;
  if (!follow) {
    $('to-latest').hidden = atBottom();
    return;
  }
  scroller.scrollTop = scroller.scrollHeight;
  lastTop = scroller.scrollTop;
  $('to-latest').hidden = true;
}
new MutationObserver(() => toBottom()).observe(scroller, { childList: true, subtree: true, characterData: true });
$('to-latest').addEventListener('click', () => toBottom(true));

// --- the one busy state ------------------------------------------------------------------------------------------

const uploading = () => state.files.some((f) => !f.id && !f.error);
/** The app's multitask strategy (GET /v1/parameters); `reject` until it is known. */
const strategy = () => state.app?.multitask || 'reject';
const inFlight = () => !!state.turn || state.waiting.length > 0;
const FOLLOW_UP = {
  enqueue: 'Queue a follow-up',
  interrupt: 'Interrupt with a message',
  rollback: 'Replace this exchange',
};
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

const eventsUrl = (taskId) => `/v1/chat-messages/${taskId}/events?user=${q(state.user)}`;

/**
 * Runs one turn into `box`: `open(signal)` is the first response (the POST's stream or the events of a turn still
 * running). The turn owns its conversation id: a detached turn never changes the page's.
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
      actionButton('Stop', () => stopQueued(turn), { cls: 'stop-queued', aria: 'Stop this queued message before it runs' }),
    );
    box.querySelector('.thoughts').before(note);
    if (taskId) box.dataset.messageId = taskId;
    void watchQueue();
  }
  renderBusy();
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
    renderBusy();
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
        showPlace(turn, d.position);
      },
      onTask: (id) => {
        started();
        if (turn.taskId) return;
        if (turn.conversationId) conversations.settle(turn.conversationId, id);
        void showSentImages(question, turn);
        turn.taskId = id;
        box.dataset.messageId = id;
        if (turn.stopRequested) void sendStop(turn);
      },
      onConversation: (id) => {
        if (turn.conversationId) return;
        turn.conversationId = id;
        if (current()) {
          setConversation(id);
          void loadConversations();
        }
      },
      onForm: showForm,
      // The key was revoked while this answer streamed (issue 47): the page becomes the key's full-page error, as a 401 does.
      onKeyRevoked: () => showKeyError(true, useKey),
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
    if (box.isConnected) addActions(box);
    // One that never started (refused, detached) leaves the queue.
    const wasWaiting = state.waiting.includes(turn);
    state.waiting = state.waiting.filter((t) => t !== turn);
    if (current() || wasWaiting) {
      if (current()) state.turn = null;
      renderBusy();
      if (turn.conversationId && !state.openForm) conversations.settle(turn.conversationId, null);
      void loadConversations();
    }
    void followUps.show(box);
  }
}

/** Ends the running stream's hold on the page (New chat, another conversation): the turn goes on on the server. */
function detach() {
  const turns = [state.turn, ...state.waiting].filter(Boolean);
  if (!turns.length) return;
  state.turn = null;
  state.waiting = [];
  for (const t of turns) t.abort.abort();
  renderBusy();
  say('');
}

async function sendStop(turn) {
  try {
    await api.post(`/v1/chat-messages/${turn.taskId}/stop`, { user: state.user });
    turn.box.classList.add('stopped');
    // A queued one left the line: the places of those after it, now.
    if (turn.box.classList.contains('queued')) void readQueue(conversationOf(turn)).catch(() => undefined);
  } catch (err) {
    say(`Stop failed: ${err.message}`);
  }
}

// --- queued messages (multitask enqueue): their place in line, and Stop before their turn --------------------------

const ordinal = (n) => `${n}${n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th'}`;
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
 * While messages wait in line: every 2 s, their places from the conversation's history (they move up as the ones
 * before them run or are stopped, from any tab). Each box's id is its stream's own (`message_queued`): nothing here
 * guesses which message is whose.
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
  if (turn.taskId) void sendStop(turn);
}

function stop() {
  const turn = state.turn;
  if (!turn) return;
  turn.stopRequested = true;
  renderBusy();
  if (turn.taskId) void sendStop(turn);
  // The stopped turn ends its stream with message_end; should that not come, the page lets go after 10 s.
  setTimeout(() => {
    if (state.turn === turn) {
      detach();
      say('Stopped (the stream did not end; the conversation shows the rest).');
    }
  }, 10_000);
}

// --- messages ----------------------------------------------------------------------------------------------------

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
  const fork = forkButton(box);
  if (fork) bar.append(fork);
  const siblings = box._siblings || [];
  if (siblings.length > 1) {
    const at = siblings.indexOf(id);
    const nav = el('span', 'siblings');
    const go = (to) => () => void openConversation(state.conversationId, { branch: siblings[to] });
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

const lastAgentBox = () => [...scroller.querySelectorAll('.msg.agent')].pop();

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
  if (inFlight() || !box._query || !box.dataset.messageId) return;
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
  await runTurn(next, (signal) => sendChat({ query, conversationId, files, strategy: strategy(), parent: parent || UUID_NIL }, signal), {
    query,
    files,
  });
  const newId = next.dataset.messageId || '';
  if (newId && state.conversationId === conversationId && !inFlight()) await openConversation(conversationId, { branch: newId });
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
    if (state.turn) detach();
    const next = addMessage('agent', '');
    await runTurn(next, async (signal) => {
      const cont = await api.post(`/v1/form/human_input/${form.form_token}`, { inputs, action, user: state.user }, { signal });
      // The question's card says so at once (as the history does after a reload).
      markAnswered(box);
      return api.request(eventsUrl(cont.task_id), { signal });
    });
  });
  toBottom(true);
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
  followUps.clear();
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
  const question = userMessage(query, sent);
  state.files = [];
  renderFiles();
  const box = addMessage('agent', '');
  toBottom(true);
  const conversationId = state.conversationId;
  void runTurn(box, (signal) => sendChat({ query, conversationId, files: sent, strategy: how }, signal), {
    query,
    files: sent,
    waiting: busy,
    queued: busy && how === 'enqueue',
    question,
  });
  return true;
}

/**
 * A sent image shows in its message at once (issue 42), as it does from history: once the turn names its message,
 * the message's own signed file links (GET /v1/messages) — the CSP allows only this origin's images, so no blob: URL.
 */
async function showSentImages(question, turn) {
  if (!question || !(turn.sentFiles || []).some((f) => f.type === 'image')) return;
  try {
    // The same event names the conversation of a new chat, just after the task.
    await null;
    const c = conversationOf(turn);
    const { data } = await api.get(`/v1/messages?conversation_id=${q(c)}&user=${q(state.user)}&limit=100&branch_id=${q(turn.taskId)}`);
    const m = data.find((x) => x.id === turn.taskId);
    if (!m || !question.isConnected) return;
    const images = m.message_files.filter((f) => f.belongs_to === 'user' && f.type === 'image' && f.url);
    for (const f of images) renderFile(question, f);
    // The names the chips said stay for the other files; an image's name is its picture's alt text now.
    const names = question.querySelector('.sent-files');
    for (const f of images) names?.querySelector(`[data-upload="${CSS.escape(f.upload_file_id || '')}"]`)?.remove();
    if (names && !names.childElementCount) names.remove();
  } catch {
    // The history shows them.
  }
}

// --- uploads -----------------------------------------------------------------------------------------------------

function kindOf(name) {
  const ext = `.${(name.split('.').pop() || '').toLowerCase()}`;
  const upload = state.app?.upload;
  if (!upload || !upload.extensions.includes(ext)) return null;
  return ['.png', '.jpg', '.jpeg', '.webp', '.gif'].includes(ext) ? 'image' : 'document';
}

function renderFiles() {
  const box = $('attachments');
  box.textContent = '';
  for (const f of state.files) {
    const chip = el('span', `chip${f.id ? '' : f.error ? ' failed' : ' uploading'}`, f.error ? `${f.name}: ${f.error}` : f.name);
    chip.dataset.name = f.name;
    const x = actionButton('×', () => {
      state.files = state.files.filter((g) => g !== f);
      renderFiles();
    });
    x.setAttribute('aria-label', `Remove ${f.name}`);
    chip.append(x);
    box.append(chip);
  }
  renderBusy();
}

async function upload(file) {
  const type = kindOf(file.name);
  const entry = { name: file.name, type };
  if (!type) {
    entry.error = 'this app does not take that kind of file';
    state.files.push(entry);
    return renderFiles();
  }
  const limit = state.app.upload.max;
  if (state.files.filter((f) => !f.error).length >= limit) {
    say(`At most ${limit} files per message.`);
    return;
  }
  state.files.push(entry);
  renderFiles();
  try {
    const form = new FormData();
    form.append('file', file);
    form.append('user', state.user);
    const res = await api.request('/v1/files/upload', { method: 'POST', body: form });
    entry.id = (await res.json()).id;
  } catch (err) {
    entry.error = err.message;
  }
  renderFiles();
}

$('file').addEventListener('change', async (ev) => {
  const files = [...ev.target.files];
  ev.target.value = '';
  await Promise.all(files.map(upload));
});

// --- conversations (chat-conversations.js) ---------------------------------------------------------------------

const conversations = conversationList({
  api,
  state,
  say,
  actionButton,
  open: (id) => openConversation(id),
  beforeDelete: (c) => {
    if (state.turn?.conversationId === c.id) detach();
  },
  afterDelete: (c) => {
    if (state.conversationId === c.id) newChat();
  },
});
const loadConversations = () => conversations.load();
// "Fork from here" under an answer (chat-fork.js): the new conversation opens, listed in the sidebar.
const forkButton = forkAction({
  state,
  say,
  actionButton,
  request: (source, messageId) => api.post(`/v1/conversations/${source}/fork`, { user: state.user, message_id: messageId }),
  rename: (forked, name) => api.post(`/v1/conversations/${forked.id}/name`, { name, user: state.user }),
  opened: async (id) => {
    await loadConversations();
    await openConversation(id);
  },
});
const renderConversations = () => conversations.render();
// Questions to ask next under the latest answer (web/chat-suggested.js).
const followUps = suggestedAfterAnswer({
  api,
  state,
  actionButton,
  send: (query) => send(query),
  enabled: () => !!state.app?.followUps,
  latest: () => lastAgentBox(),
  busy: () => inFlight(),
});

/** Shows a conversation's thread: the newest branch, or (`branch`) the one through that message. */
async function openConversation(id, { branch } = {}) {
  detach();
  closeDrawer();
  setConversation(id);
  state.openForm = null;
  renderConversations();
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
    addActions(box);
  }
  toBottom(true);
  // A turn still waiting for its form (or still running), and messages queued behind it: re-attach to show the form
  // or the rest of each answer, in order.
  const open = data.filter(
    (m) => ['paused', 'running', 'pending', 'queued'].includes(m.turn_status) && !data.some((n) => n.resumed_from_message_id === m.id),
  );
  if (!open.length) void followUps.show(lastAgentBox());
  for (const m of open) {
    const box = boxes.get(m.id);
    box._answer = '';
    paintAnswer(box);
    const queued = m.turn_status === 'queued';
    void runTurn(box, (signal) => api.request(eventsUrl(m.id), { signal }), { waiting: queued, queued, taskId: queued ? m.id : '' });
  }
}

function newChat() {
  detach();
  closeDrawer();
  setConversation('');
  state.openForm = null;
  showWelcome();
  renderConversations();
  $('query').focus();
}

// --- the app -----------------------------------------------------------------------------------------------------

/** The app's name, opening statement, suggested questions and file upload (GET /v1/info and /v1/parameters). */
async function loadApp() {
  if (!state.key) return;
  try {
    const [info, params] = await Promise.all([api.get('/v1/info'), api.get(`/v1/parameters?user=${q(state.user)}`)]);
    const fu = params.file_upload || {};
    state.app = {
      name: info.name,
      opening: params.opening_statement || '',
      suggested: params.suggested_questions || [],
      upload: fu.enabled ? { extensions: fu.allowed_file_extensions || [], max: fu.number_limits || 1 } : null,
      multitask: params.multitask_strategy || 'reject',
      followUps: !!params.suggested_questions_after_answer?.enabled,
    };
    renderBusy();
    $('app-name').textContent = info.name;
    $('app-title').textContent = info.name;
    document.title = info.name;
    $('attach').hidden = !state.app.upload;
    if (state.app.upload) $('file').accept = state.app.upload.extensions.join(',');
    if (!state.conversationId) showWelcome();
    // A reload opens the conversation beside this: its latest answer gets its questions once the page knows the feature.
    else void followUps.show(lastAgentBox());
  } catch (err) {
    if (err.status !== 401) say(err.message);
  }
}

/** The first screen of a new chat: what the agent says first and questions to start with. */
function showWelcome() {
  scroller.textContent = '';
  if (!state.app) return;
  const w = el('div', 'welcome');
  w.append(el('h1', '', state.app.name));
  if (state.app.opening) {
    const p = el('div', 'opening msg-md');
    p.append(messageBox('agent', state.app.opening).querySelector('.text'));
    w.append(p);
  }
  for (const s of state.app.suggested) w.append(actionButton(s, () => send(s), { cls: 'suggested' }));
  scroller.append(w);
}

// --- the drawer (phones) -----------------------------------------------------------------------------------------

function openDrawer() {
  document.body.classList.add('drawer-open');
  $('backdrop').hidden = false;
  $('menu').setAttribute('aria-expanded', 'true');
  $('sidebar').querySelector('button')?.focus();
}
function closeDrawer() {
  if (!document.body.classList.contains('drawer-open')) return;
  document.body.classList.remove('drawer-open');
  $('backdrop').hidden = true;
  $('menu').setAttribute('aria-expanded', 'false');
}
$('menu').addEventListener('click', () => (document.body.classList.contains('drawer-open') ? closeDrawer() : openDrawer()));
$('backdrop').addEventListener('click', closeDrawer);
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape') closeDrawer();
});

// --- the composer ------------------------------------------------------------------------------------------------

wireComposer($('composer'), $('query'), (text) => !!send(text));
$('stop').addEventListener('click', stop);
for (const b of document.querySelectorAll('.new-chat')) b.addEventListener('click', newChat);
$('save-settings').addEventListener('click', () => {
  state.user = $('user').value.trim() || state.user;
  localStorage.setItem('agent-chat-user', state.user);
  $('settings').open = false;
  const key = $('api-key').value.trim();
  storeKey(key);
  useKey(key);
});

/** The app, its conversations and (after a reload) the conversation this tab had open, a running turn re-attached. */
function start() {
  if (!state.key) return;
  const open = state.conversationId;
  void loadApp();
  void loadConversations();
  if (open) void openConversation(open);
}

/** Another key (pasted as #key=, into the settings or the key error's box): the page starts again on it, no reload. */
function useKey(key) {
  detach();
  state.key = key;
  state.app = null;
  state.conversations = [];
  state.openForm = null;
  $('api-key').value = key;
  setConversation('');
  showKeyError(false);
  scroller.textContent = '';
  renderConversations();
  say('');
  start();
}

loadSettings();
state.conversationId = sessionStorage.getItem(OPEN_CONVERSATION) || '';
onPastedKey(useKey);
start();
