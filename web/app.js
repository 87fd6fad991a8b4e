// The chat page: a Dify service-API client in the browser. It streams turns over SSE (fetch + a small
// parser, since the turn starts with a POST), re-attaches by Last-Event-ID when a stream breaks, renders
// agent thoughts, stops turns, and renders ask_human forms whose submission continues the turn.
// The app key comes from the URL fragment (#key=..., never sent to a server) or the settings box and
// stays in this tab's sessionStorage.

import { consumeTurn, el, markAnswered, messageBox, renderForm, renderThought } from './turn-view.js';

const $ = (id) => document.getElementById(id);
const state = { key: '', user: '', conversationId: '', taskId: '', abort: null, app: null };

function loadSettings() {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('key')) {
    sessionStorage.setItem('agent-chat-key', hash.get('key'));
    history.replaceState(null, '', location.pathname);
  }
  state.key = sessionStorage.getItem('agent-chat-key') || '';
  state.user = localStorage.getItem('agent-chat-user') || `web-${Math.random().toString(36).slice(2, 10)}`;
  localStorage.setItem('agent-chat-user', state.user);
  $('api-key').value = state.key;
  $('user').value = state.user;
  if (!state.key) $('settings').open = true;
}

async function api(path, init = {}) {
  const res = await fetch(path, {
    ...init,
    headers: { authorization: `Bearer ${state.key}`, 'content-type': 'application/json', ...(init.headers || {}) },
  });
  if (!res.ok && !(res.headers.get('content-type') || '').includes('text/event-stream')) {
    const body = await res.json().catch(() => ({}));
    const err = new Error(body.message || `HTTP ${res.status}`);
    err.code = body.code;
    err.body = body;
    throw err;
  }
  return res;
}

function addMessage(role, text) {
  const m = messageBox(role, text);
  $('messages').append(m);
  m.scrollIntoView({ block: 'end' });
  return m;
}

const eventsUrl = (taskId) => `/v1/chat-messages/${taskId}/events?user=${encodeURIComponent(state.user)}`;

/** Renders an ask_human form whose submission continues the turn in a new agent message. */
function showForm(box, form) {
  renderForm(box, form, async (inputs, action) => {
    try {
      const res = await api(`/v1/form/human_input/${form.form_token}`, {
        method: 'POST',
        body: JSON.stringify({ inputs, action, user: state.user }),
      });
      const cont = await res.json();
      await follow(addMessage('agent', ''), eventsUrl(cont.task_id));
    } catch (err) {
      $('status').textContent = err.message;
    }
  });
}

/** Consumes a turn's stream into a message box; re-attaches with Last-Event-ID if the stream breaks. */
function consume(box, res, attachUrl) {
  let url = attachUrl;
  return consumeTurn(box, res, {
    onTask: (taskId) => {
      state.taskId = taskId;
      url = eventsUrl(taskId);
    },
    onConversation: (id) => {
      if (!state.conversationId) state.conversationId = id;
    },
    onForm: showForm,
    reattach: (lastId) => (url ? api(url, { headers: { 'last-event-id': String(lastId) } }) : Promise.reject(new Error('stream lost'))),
  });
}

async function follow(box, url) {
  setBusy(true);
  try {
    await consume(box, await api(url), url);
  } finally {
    setBusy(false);
    await loadConversations();
  }
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  $('status').textContent = busy ? 'The agent is working…' : '';
}

async function send(query) {
  document.querySelector('.welcome')?.remove();
  addMessage('user', query);
  const box = addMessage('agent', '');
  setBusy(true);
  state.abort = new AbortController();
  try {
    const res = await api('/v1/chat-messages', {
      method: 'POST',
      body: JSON.stringify({
        inputs: {},
        query,
        user: state.user,
        response_mode: 'streaming',
        conversation_id: state.conversationId || undefined,
      }),
      signal: state.abort.signal,
    });
    await consume(box, res, null);
  } catch (err) {
    box.classList.add('error');
    box.querySelector('.text').textContent = `Error: ${err.message}`;
    if (err.body && err.body.form_token) $('status').textContent = 'Answer the open form first.';
  } finally {
    setBusy(false);
    await loadConversations();
  }
}

async function stop() {
  if (!state.taskId) return;
  await api(`/v1/chat-messages/${state.taskId}/stop`, { method: 'POST', body: JSON.stringify({ user: state.user }) });
  const last = [...document.querySelectorAll('.msg.agent')].pop();
  if (last) last.classList.add('stopped');
}

async function loadConversations() {
  if (!state.key) return;
  try {
    const res = await api(`/v1/conversations?user=${encodeURIComponent(state.user)}&limit=50`);
    const { data } = await res.json();
    const ul = $('conversations');
    ul.textContent = '';
    for (const c of data) {
      const li = el('li', c.id === state.conversationId ? 'active' : '', c.name);
      li.addEventListener('click', () => openConversation(c.id));
      ul.append(li);
    }
  } catch (err) {
    $('status').textContent = err.message;
  }
}

async function openConversation(id) {
  state.conversationId = id;
  $('messages').textContent = '';
  const res = await api(`/v1/messages?conversation_id=${id}&user=${encodeURIComponent(state.user)}&limit=100`);
  const { data } = await res.json();
  const boxes = new Map();
  for (const m of data) {
    // An ask_human continuation carries the paused message's query: show the question once.
    if (!m.resumed_from_message_id) addMessage('user', m.query);
    else if (boxes.has(m.resumed_from_message_id)) markAnswered(boxes.get(m.resumed_from_message_id));
    const box = addMessage('agent', m.answer);
    boxes.set(m.id, box);
    for (const t of m.agent_thoughts) renderThought(box, t);
    if (m.turn_status === 'stopped') box.classList.add('stopped');
    if (m.turn_status === 'failed' && m.error) {
      box.classList.add('error');
      box.querySelector('.text').textContent = `${m.answer}${m.answer ? '\n' : ''}Error: ${m.error}`;
    }
  }
  // A turn still waiting for its form (or still running): re-attach to show the form or the rest of the answer.
  const last = data.at(-1);
  if (last && ['paused', 'running', 'pending'].includes(last.turn_status) && !data.some((m) => m.resumed_from_message_id === last.id)) {
    const box = $('messages').lastElementChild;
    box.querySelector('.text').textContent = '';
    void follow(box, eventsUrl(last.id));
  }
  await loadConversations();
}

/** The app's name, opening statement and suggested questions (GET /v1/info and /v1/parameters). */
async function loadApp() {
  if (!state.key) return;
  try {
    const [info, params] = await Promise.all([api('/v1/info').then((r) => r.json()), api('/v1/parameters').then((r) => r.json())]);
    state.app = { name: info.name, opening: params.opening_statement || '', suggested: params.suggested_questions || [] };
    $('app-name').textContent = info.name;
    document.title = info.name;
    if (!state.conversationId) showWelcome();
  } catch (err) {
    $('status').textContent = err.message;
  }
}

/** The first screen of a new chat: what the agent says first and questions to start with. */
function showWelcome() {
  $('messages').textContent = '';
  if (!state.app) return;
  const w = el('div', 'welcome');
  w.append(el('h1', '', state.app.name));
  if (state.app.opening) w.append(el('p', 'opening', state.app.opening));
  for (const q of state.app.suggested) {
    const b = el('button', 'suggested', q);
    b.type = 'button';
    b.addEventListener('click', () => {
      w.remove();
      void send(q);
    });
    w.append(b);
  }
  $('messages').append(w);
}

$('composer').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const q = $('query').value.trim();
  if (!q) return;
  $('query').value = '';
  void send(q);
});
$('query').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => void stop());
$('new-chat').addEventListener('click', () => {
  state.conversationId = '';
  showWelcome();
  void loadConversations();
});
$('save-settings').addEventListener('click', () => {
  state.key = $('api-key').value.trim();
  state.user = $('user').value.trim() || state.user;
  sessionStorage.setItem('agent-chat-key', state.key);
  localStorage.setItem('agent-chat-user', state.user);
  $('settings').open = false;
  void loadApp();
  void loadConversations();
});

loadSettings();
void loadApp();
void loadConversations();
