// The studio's logs (issue 34 item 4), like Dify's "Logs & Annotations": every conversation of the selected app —
// end users' and the debugger's — filtered by end user, date, a turn's status and feedback; open one to read its
// turns (the chat page's renderer), open a turn in the turn inspector, turn an answer into an annotation.
// A screen of its own (issue 42 problem 1; it was the bottom of the agent screen, where the debugger column covered
// its filters and columns at 1366 px), listed again each time it is opened. A module over the console API (GET
// agent/conversations, agent/conversations/{id}/messages, POST annotations); it follows the agent picked in the
// studio's list and asks studio.js to inspect a turn with a `studio:inspect` event (the inspector shows under the logs).
// A knowledge answer shows its citations card (citations.js) as in the chat page.
import { renderCitations } from './citations.js';
import { register } from './studio-common.js';
import { createApi } from './lib/api.js';
import { el, messageBox, paintAnswer, renderFile, renderThought } from './turn-view.js';

const $ = (id) => document.getElementById(id);
const api = createApi({ base: '/console/api', key: () => sessionStorage.getItem('agent-studio-key') || '' });
const state = { appId: '', page: 1, hasMore: false };
const when = (unix) => new Date(unix * 1000).toLocaleString();
const say = (text) => ($('status').textContent = text);

function filters() {
  const p = new URLSearchParams({ page: String(state.page), limit: '20' });
  const add = (name, value) => value && p.set(name, value);
  add('user', $('log-user').value.trim());
  add('status', $('log-status').value);
  add('feedback', $('log-feedback').value);
  add('invoke_from', $('log-source').value);
  if ($('log-from').value) p.set('from', new Date(`${$('log-from').value}T00:00:00`).toISOString());
  if ($('log-to').value) p.set('to', new Date(`${$('log-to').value}T23:59:59.999`).toISOString());
  return p;
}

async function loadLogs() {
  if (!state.appId) return;
  try {
    const page = await api.get(`/apps/${state.appId}/agent/conversations?${filters()}`);
    state.hasMore = page.has_more;
    const body = $('log-table').querySelector('tbody');
    body.textContent = '';
    for (const c of page.data) {
      const tr = el('tr', c.last_status === 'failed' ? 'failed' : '');
      tr.dataset.conversation = c.id;
      const open = el('button', 'link', c.name || c.first_query || c.id);
      open.type = 'button';
      open.addEventListener('click', () => void openLog(c));
      const name = el('td');
      name.append(open);
      const feedback = [c.like_count ? `${c.like_count} like` : '', c.dislike_count ? `${c.dislike_count} dislike` : '']
        .filter(Boolean)
        .join(', ');
      tr.append(
        name,
        el('td', '', c.from_end_user_session_id ?? (c.invoke_from === 'debugger' ? 'debugger' : '')),
        el('td', '', String(c.message_count)),
        el('td', `status ${c.last_status ?? ''}`, `${c.last_status ?? ''}${c.failed_count ? ` (${c.failed_count} failed)` : ''}`),
        el('td', '', feedback),
        el('td', '', when(c.updated_at)),
      );
      body.append(tr);
    }
    if (!page.data.length) {
      const tr = el('tr');
      const td = el('td', 'empty', 'No conversation matches.');
      td.colSpan = 6;
      tr.append(td);
      body.append(tr);
    }
    $('log-page').textContent = `Page ${page.page} · ${page.total} conversation${page.total === 1 ? '' : 's'}`;
    $('log-prev').disabled = state.page <= 1;
    $('log-next').disabled = !state.hasMore;
  } catch (err) {
    say(err.message);
  }
}

async function openLog(c) {
  try {
    const { data } = await api.get(`/apps/${state.appId}/agent/conversations/${c.id}/messages`);
    $('log-title').textContent = `${c.name} · ${c.from_end_user_session_id ?? c.invoke_from}`;
    const list = $('log-messages');
    list.textContent = '';
    for (const m of data) {
      if (!m.resumed_from_message_id) list.append(messageBox('user', m.query));
      const box = messageBox('agent', m.answer);
      box.dataset.messageId = m.id;
      for (const t of m.agent_thoughts) renderThought(box, t);
      for (const f of m.message_files) if (f.belongs_to !== 'user') renderFile(box, f);
      // The chunks a knowledge answer was given, as the chat page shows them (issue 42 problem 6).
      renderCitations(box, m.retriever_resources);
      if (m.turn_status === 'failed') {
        box.classList.add('error');
        box._error = `${m.error_code ? `${m.error_code}: ` : ''}${m.error ?? 'failed'}`;
        paintAnswer(box);
      }
      if (m.turn_status === 'stopped') box.classList.add('stopped');
      const bar = el('div', 'actions');
      bar.append(el('span', `badge ${m.turn_status}`, m.turn_status));
      if (m.feedback) bar.append(el('span', `badge feedback ${m.feedback.rating}`, m.feedback.rating));
      const inspect = el('button', 'inspect', 'Inspect');
      inspect.type = 'button';
      inspect.addEventListener('click', () => document.dispatchEvent(new CustomEvent('studio:inspect', { detail: m.id })));
      bar.append(inspect);
      if (m.answer && m.turn_status === 'succeeded') {
        const annotate = el('button', 'annotate', 'Add as annotation');
        annotate.type = 'button';
        annotate.addEventListener('click', () => void addAnnotation(annotate, m));
        bar.append(annotate);
      }
      box.append(bar);
      list.append(box);
    }
    $('log-detail').hidden = false;
    $('log-detail').scrollIntoView({ block: 'start' });
  } catch (err) {
    say(err.message);
  }
}

async function addAnnotation(button, m) {
  try {
    await api.post(`/apps/${state.appId}/annotations`, { question: m.query, content: m.answer });
    button.textContent = 'Annotated';
    button.disabled = true;
    say('Added the answer as an annotation (similar questions get it when annotation reply is on).');
    document.dispatchEvent(new CustomEvent('studio:annotations-changed'));
  } catch (err) {
    say(`Annotation failed: ${err.message}`);
  }
}

$('log-filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  state.page = 1;
  void loadLogs();
});
$('log-prev').addEventListener('click', () => {
  state.page = Math.max(1, state.page - 1);
  void loadLogs();
});
$('log-next').addEventListener('click', () => {
  state.page += 1;
  void loadLogs();
});

/** Follows the agent picked in the studio's list (the active item of #apps); the screen lists its logs when shown. */
function follow() {
  const active = document.querySelector('#apps li.active');
  const id = active?.dataset.app || '';
  if (id === state.appId) return;
  state.appId = id;
  state.page = 1;
  $('log-detail').hidden = true;
}
new MutationObserver(follow).observe($('apps'), { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
follow();

register({
  name: 'logs',
  title: 'Logs',
  el: $('logs'),
  show: () => {
    follow();
    return loadLogs();
  },
});
