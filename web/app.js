// The chat page: a Dify service-API client in the browser. It streams turns over SSE (fetch + a small
// parser, since the turn starts with a POST), re-attaches by Last-Event-ID when a stream breaks, renders
// agent thoughts, stops turns, and renders ask_human forms whose submission continues the turn.
// The app key comes from the URL fragment (#key=..., never sent to a server) or the settings box and
// stays in this tab's sessionStorage.

const $ = (id) => document.getElementById(id);
const state = { key: '', user: '', conversationId: '', taskId: '', abort: null };

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

async function* frames(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const raw = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const f = { id: undefined, event: undefined, data: '' };
      for (const line of raw.split('\n')) {
        if (line.startsWith('id:')) f.id = line.slice(3).trim();
        else if (line.startsWith('event:')) f.event = line.slice(6).trim();
        else if (line.startsWith('data:')) f.data += line.slice(5).trim();
      }
      if (f.data) yield { ...f, data: JSON.parse(f.data) };
    }
  }
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function addMessage(role, text) {
  const m = el('div', `msg ${role}`);
  m.append(el('div', 'who', role === 'user' ? 'You' : 'Agent'), el('div', 'thoughts'), el('div', 'text', text));
  $('messages').append(m);
  m.scrollIntoView({ block: 'end' });
  return m;
}

function renderThought(box, t) {
  let row = box.querySelector(`[data-thought="${t.id}"]`);
  if (!row) {
    row = el('div', 'thought');
    row.dataset.thought = t.id;
    box.querySelector('.thoughts').append(row);
  }
  row.textContent = '';
  if (t.tool) {
    row.append(el('strong', '', `Tool ${t.tool}: `), el('code', '', t.tool_input || ''));
    if (t.observation) row.append(el('div', '', `Result: ${t.observation}`));
  } else {
    row.append(el('em', '', `Thinking: ${t.thought}`));
  }
}

function renderForm(box, form) {
  const f = el('form', 'form');
  f.dataset.token = form.form_token;
  f.append(el('div', '', form.form_content || 'The agent needs your input.'));
  for (const field of form.inputs || []) {
    const label = el('label', '', field.label || field.name);
    let input;
    if (field.type === 'select') {
      input = el('select');
      for (const o of field.options) {
        const opt = el('option', '', o.label);
        opt.value = o.value;
        input.append(opt);
      }
    } else {
      input = el('textarea');
      input.rows = 2;
      input.placeholder = field.placeholder || '';
      if (field.default) input.value = field.default;
    }
    input.name = field.name;
    input.required = !!field.required;
    label.append(input);
    f.append(label);
  }
  for (const a of form.actions || []) {
    const b = el('button', a.style || '', a.label);
    b.type = 'submit';
    b.value = a.id;
    f.append(b);
  }
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const action = ev.submitter ? ev.submitter.value : (form.actions[0] || {}).id;
    const inputs = {};
    for (const field of form.inputs || []) inputs[field.name] = f.elements[field.name].value;
    try {
      const res = await api(`/v1/form/human_input/${form.form_token}`, { method: 'POST', body: JSON.stringify({ inputs, action, user: state.user }) });
      const cont = await res.json();
      f.replaceWith(el('div', 'thought', 'Submitted.'));
      await follow(addMessage('agent', ''), `/v1/chat-messages/${cont.task_id}/events?user=${encodeURIComponent(state.user)}`);
    } catch (err) {
      $('status').textContent = err.message;
    }
  });
  box.append(f);
}

/** Consumes a turn's stream into a message box; re-attaches with Last-Event-ID if the stream breaks. */
async function consume(box, res, attachUrl) {
  let lastId = 0;
  let answer = '';
  let ended = false;
  const text = box.querySelector('.text');
  for (let attempt = 0; attempt < 5 && !ended; attempt++) {
    try {
      for await (const f of frames(res)) {
        if (f.id) lastId = Number(f.id);
        const d = f.data;
        if (d.task_id) {
          state.taskId = d.task_id;
          attachUrl = `/v1/chat-messages/${d.task_id}/events?user=${encodeURIComponent(state.user)}`;
        }
        if (d.conversation_id && !state.conversationId) state.conversationId = d.conversation_id;
        if (f.event === 'agent_message') text.textContent = answer += d.answer;
        else if (f.event === 'message' || f.event === 'message_replace') text.textContent = answer = d.answer;
        else if (f.event === 'agent_thought') renderThought(box, d);
        else if (f.event === 'human_input_required') renderForm(box, d.data);
        else if (f.event === 'error') {
          box.classList.add('error');
          text.textContent = `${answer}${answer ? '\n' : ''}Error: ${d.message}`;
          ended = true;
        } else if (f.event === 'message_end') ended = true;
      }
    } catch (err) {
      if (err.name === 'AbortError') return;
    }
    if (!ended && attachUrl) {
      res = await api(attachUrl, { headers: { 'last-event-id': String(lastId) } });
    }
  }
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
  addMessage('user', query);
  const box = addMessage('agent', '');
  setBusy(true);
  state.abort = new AbortController();
  try {
    const res = await api('/v1/chat-messages', {
      method: 'POST',
      body: JSON.stringify({ inputs: {}, query, user: state.user, response_mode: 'streaming', conversation_id: state.conversationId || undefined }),
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
  for (const m of data) {
    addMessage('user', m.query);
    const box = addMessage('agent', m.answer);
    for (const t of m.agent_thoughts) renderThought(box, t);
    if (m.turn_status === 'stopped') box.classList.add('stopped');
  }
  await loadConversations();
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
  $('messages').textContent = '';
  void loadConversations();
});
$('save-settings').addEventListener('click', () => {
  state.key = $('api-key').value.trim();
  state.user = $('user').value.trim() || state.user;
  sessionStorage.setItem('agent-chat-key', state.key);
  localStorage.setItem('agent-chat-user', state.user);
  $('settings').open = false;
  void loadConversations();
});

loadSettings();
void loadConversations();
