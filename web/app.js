// The chat page: a Dify service-API client in the browser (the app key comes from the URL fragment #key=... — never
// sent to a server — or the settings box, and stays in this tab's sessionStorage). Uploads, feedback, copy,
// regenerate, rename and delete use the service API (docs/PROTOCOL.md §1); answers are sanitised Markdown with the
// agent's files as attachments (turn-view.js).
//
// This module owns the page's state, the app's name and welcome screen, the phone drawer and the start (and restart on
// another key); each concern is a module of its own, wired here through one `page` object whose functions each
// module calls at call time (so none imports another's state):
//   chat-settings.js        the user, the stored key and the conversation open in this tab
//   chat-composer.js        the composer: the busy state, send (by the multitask strategy), the ask_human form
//   chat-turns.js           the running turn and those waiting behind it: stream, Stop, detach
//   chat-queue.js           queued messages' places in line and their own Stop
//   chat-history.js         a conversation's thread from history, its open turns re-attached; New chat
//   chat-answer-actions.js  the bar under an answer: copy, rating, regenerate, fork, sibling arrows
//   chat-files.js           files picked, uploaded and shown in the sent message
//   chat-scroll.js          the list follows a streaming answer unless the reader scrolled up
//   chat-conversations.js, chat-fork.js, chat-suggested.js, chat-key.js: the sidebar, fork, follow-up questions, the key

import { chatAnswerActions } from './chat-answer-actions.js';
import { chatComposer } from './chat-composer.js';
import { conversationList } from './chat-conversations.js';
import { chatFiles } from './chat-files.js';
import { forkAction } from './chat-fork.js';
import { chatHistory } from './chat-history.js';
import { onPastedKey, showKeyError } from './chat-key.js';
import { chatQueue } from './chat-queue.js';
import { followScroll } from './chat-scroll.js';
import { chatSettings } from './chat-settings.js';
import { suggestedAfterAnswer } from './chat-suggested.js';
import { chatTurns } from './chat-turns.js';
import { createApi } from './lib/api.js';
import { actionButton, el, messageBox } from './turn-view.js';

const $ = (id) => document.getElementById(id);
const state = {
  key: '',
  user: '',
  conversationId: '',
  /** The running turn: {abort, taskId, stopRequested, box, conversationId}; null when idle (chat-turns.js). */
  turn: null,
  /** Turns accepted behind it (multitask strategies), oldest first: each starts (becomes `turn`) with its first event. */
  waiting: [],
  app: null,
  /** Files picked for the next message: {localId, name, type, id?, error?} (chat-files.js). */
  files: [],
  conversations: [],
  /** The ask_human form waiting in the open conversation: {conversationId, form}; null when none. */
  openForm: null,
};
// A 401 anywhere (the key revoked or mistyped): the page becomes the key's full-page error (chat-key.js).
const api = createApi({ key: () => state.key, onUnauthorized: () => showKeyError(true, useKey) });
const say = (text) => ($('status').textContent = text);
const scroller = $('messages');

/** What the modules share: the state and api, and each module's functions (added below), called at call time. */
const page = { state, api, $, say, q: (s) => encodeURIComponent(s), scroller, useKey, showWelcome, closeDrawer };
page.toBottom = followScroll(scroller, $('to-latest'));
Object.assign(page, chatSettings(page), chatComposer(page), chatTurns(page), chatQueue(page), chatFiles(page));
Object.assign(page, chatHistory(page), chatAnswerActions(page));

// --- conversations (chat-conversations.js), fork (chat-fork.js), follow-up questions (chat-suggested.js) ---------

page.conversations = conversationList({
  api,
  state,
  say,
  actionButton,
  open: (id) => page.openConversation(id),
  beforeDelete: (c) => {
    if (state.turn?.conversationId === c.id) page.detach();
  },
  afterDelete: (c) => {
    if (state.conversationId === c.id) page.newChat();
  },
});
page.loadConversations = () => page.conversations.load();
page.renderConversations = () => page.conversations.render();
// "Fork from here" under an answer: the new conversation opens, listed in the sidebar.
page.forkButton = forkAction({
  state,
  say,
  actionButton,
  request: (source, messageId) => api.post(`/v1/conversations/${source}/fork`, { user: state.user, message_id: messageId }),
  rename: (forked, name) => api.post(`/v1/conversations/${forked.id}/name`, { name, user: state.user }),
  opened: async (id) => {
    await page.loadConversations();
    await page.openConversation(id);
  },
});
// Questions to ask next under the latest answer (web/chat-suggested.js).
page.followUps = suggestedAfterAnswer({
  questions: async (id) => (await api.get(`/v1/messages/${id}/suggested?user=${page.q(state.user)}`)).data,
  actionButton,
  send: (query) => page.send(query),
  enabled: () => !!state.app?.followUps,
  latest: () => page.lastAgentBox(),
  busy: () => page.inFlight(),
});

// --- the app -----------------------------------------------------------------------------------------------------

/** The app's name, opening statement, suggested questions and file upload (GET /v1/info and /v1/parameters). */
async function loadApp() {
  if (!state.key) return;
  try {
    const [info, params] = await Promise.all([api.get('/v1/info'), api.get(`/v1/parameters?user=${page.q(state.user)}`)]);
    const fu = params.file_upload || {};
    state.app = {
      name: info.name,
      opening: params.opening_statement || '',
      suggested: params.suggested_questions || [],
      upload: fu.enabled ? { extensions: fu.allowed_file_extensions || [], max: fu.number_limits || 1 } : null,
      multitask: params.multitask_strategy || 'reject',
      followUps: !!params.suggested_questions_after_answer?.enabled,
    };
    page.renderBusy();
    $('app-name').textContent = info.name;
    $('app-title').textContent = info.name;
    document.title = info.name;
    $('attach').hidden = !state.app.upload;
    if (state.app.upload) $('file').accept = state.app.upload.extensions.join(',');
    if (!state.conversationId) showWelcome();
    // A reload opens the conversation beside this: its latest answer gets its questions once the page knows the feature.
    else void page.followUps.show(page.lastAgentBox());
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
  for (const s of state.app.suggested) w.append(actionButton(s, () => page.send(s), { cls: 'suggested' }));
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

// --- the start ---------------------------------------------------------------------------------------------------

for (const b of document.querySelectorAll('.new-chat')) b.addEventListener('click', page.newChat);

/** The app, its conversations and (after a reload) the conversation this tab had open, a running turn re-attached. */
function start() {
  if (!state.key) return;
  const open = state.conversationId;
  void loadApp();
  void page.loadConversations();
  if (open) void page.openConversation(open);
}

/** Another key (pasted as #key=, into the settings or the key error's box): the page starts again on it, no reload. */
function useKey(key) {
  page.detach();
  state.key = key;
  state.app = null;
  state.conversations = [];
  state.openForm = null;
  $('api-key').value = key;
  page.setConversation('');
  showKeyError(false);
  scroller.textContent = '';
  page.renderConversations();
  say('');
  start();
}

page.loadSettings();
onPastedKey(useKey);
start();
