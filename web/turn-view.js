// How a turn looks in the browser, the one message renderer of every page that shows turns: answers as sanitised
// Markdown (lib/markdown.js), thoughts as readable tool cards, the agent's files as attachments (images inline),
// ask_human forms, and a consumer of the one stream client (lib/stream.js). Everything but the sanitised Markdown
// is rendered as text (textContent), never as HTML.
import './lib/messages.css';
import { renderCitations } from './citations.js';
import { icon } from './lib/icons.js';
import { renderMarkdown } from './lib/markdown.js';
import { followTurn } from './lib/stream.js';

export { frames } from './lib/stream.js';

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * A button of a message's action bar (both pages): a text one, or an icon (lib/icons.js) with an optional text;
 * `extra`: {cls, icon, text, title, aria}.
 */
export function actionButton(label, onClick, extra = {}) {
  const b = el('button', extra.cls || '', extra.icon ? undefined : label);
  if (extra.icon) b.append(icon(extra.icon), ...(extra.text ? [el('span', '', extra.text)] : []));
  b.type = 'button';
  if (extra.title) b.title = extra.title;
  if (extra.aria) b.setAttribute('aria-label', extra.aria);
  b.addEventListener('click', onClick);
  return b;
}

function parseJson(text) {
  if (typeof text !== 'string' || !/^\s*[[{]/.test(text)) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const show = (v) => (typeof v === 'string' ? v : JSON.stringify(v));

/** A value as people read it: an object becomes "key  value" rows, anything else its text. */
function readable(text) {
  const v = parseJson(text);
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const dl = el('dl', 'kv');
    for (const [k, val] of Object.entries(v)) dl.append(el('dt', '', k), el('dd', '', show(val)));
    return dl;
  }
  return el('div', 'plain', v === undefined ? text : show(v));
}

/** Creates or updates the card of one thought (a tool call with its input and result, or the agent's thinking). */
export function renderThought(box, t) {
  let row = box.querySelector(`[data-thought="${CSS.escape(t.id)}"]`);
  if (!row) {
    row = el('div', 'thought');
    row.dataset.thought = t.id;
    box.querySelector('.thoughts').append(row);
  }
  row.textContent = '';
  if (t.tool === 'ask_human') {
    // The form itself is rendered below the answer; the card says what was asked and whether it was answered.
    row.classList.add('tool');
    const head = el('div', 'tool-head');
    const answered = t.observation || row.dataset.answered;
    head.append(el('span', 'tool-name', 'Asked you'), el('span', 'tool-state', answered ? 'answered' : 'waiting for your answer'));
    row.append(head);
    const question = (parseJson(t.tool_input) || {}).question;
    if (question) row.append(el('div', 'plain ask-question', question));
    // The continuation closes the call with the form's result: show what was answered, or why not.
    const result = parseJson(t.observation);
    if (result && result.values) row.append(readable(JSON.stringify(result.values)));
    else if (result && result.status) row.append(el('div', 'plain', `(${result.status})`));
  } else if (t.tool) {
    row.classList.add('tool');
    const head = el('div', 'tool-head');
    head.append(el('span', 'tool-name', t.tool), el('span', 'tool-state', t.observation ? 'done' : 'running…'));
    row.append(head);
    if (t.tool_input) row.append(readable(t.tool_input));
    if (t.observation) {
      const result = el('div', 'tool-result');
      result.append(el('span', 'label', 'Result'), readable(t.observation));
      row.append(result);
    }
  } else if (t.thought) {
    row.append(el('em', '', `Thinking: ${t.thought}`));
  }
  showQuestionOnce(box);
}

/**
 * An ask_human question is said once (issue 42 problem 8): the paused answer carries the form's text (the api stores
 * it so), so the card and the form leave out what the answer above them already says.
 */
function showQuestionOnce(box) {
  const said = (box._answer || '').replace(/\s+/g, ' ');
  for (const e of box.querySelectorAll('.ask-question, .form-content')) {
    const text = (e.textContent || '').replace(/\s+/g, ' ').trim();
    e.hidden = !!text && said.includes(text);
  }
}

/** Marks the ask_human card of a paused message answered (its continuation is a later message). */
export function markAnswered(box) {
  for (const row of box.querySelectorAll('.thought.tool')) {
    row.dataset.answered = '1';
    const state = row.querySelector('.tool-state');
    if (state && state.textContent === 'waiting for your answer') state.textContent = 'answered';
  }
}

/** An ask_human form; `onSubmit(inputs, action)` sends it and returns when the continuation is followed. */
export function renderForm(box, form, onSubmit) {
  const f = el('form', 'form');
  f.dataset.token = form.form_token;
  f.setAttribute('aria-label', 'Your answer to the agent');
  f.append(el('div', 'form-content', form.form_content || 'The agent needs your input.'));
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
      if (field.default) input.value = field.default;
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
    f.replaceWith(el('div', 'thought', 'Submitted.'));
    await onSubmit(inputs, action);
  });
  box.append(f);
  showQuestionOnce(box);
}

/** Where a link the api signed points, on this page's origin (the CSP allows only 'self'; the api may name another host). */
export function sameOrigin(url) {
  try {
    const u = new URL(url, location.href);
    return `${u.pathname}${u.search}`;
  } catch {
    return url;
  }
}

/** The file name a signed link serves (its Content-Disposition), read once per file with a HEAD request. */
async function fileName(url) {
  try {
    const res = await fetch(url, { method: 'HEAD' });
    const cd = res.headers.get('content-disposition') || '';
    const m = /filename\*=UTF-8''([^;]+)/i.exec(cd) || /filename="?([^";]+)"?/i.exec(cd);
    return m ? decodeURIComponent(m[1]) : '';
  } catch {
    return '';
  }
}

/**
 * Shows one file attached to a message (`{id, type, url, filename?, size?}`: a message_file event or history's
 * message_files): an image inline, every file as a download link named by its file name. Once per file id.
 */
export function renderFile(box, file) {
  let list = box.querySelector('.files');
  if (!list) {
    list = el('div', 'files');
    box.querySelector('.text').after(list);
  }
  if (list.querySelector(`[data-file="${CSS.escape(file.id)}"]`)) return;
  const url = sameOrigin(file.url);
  const item = el('div', `file ${file.type === 'image' ? 'image' : 'document'}`);
  item.dataset.file = file.id;
  const link = el('a', 'download', file.type === 'image' ? 'image' : 'file');
  link.href = `${url}${url.includes('?') ? '&' : '?'}as_attachment=true`;
  link.setAttribute('download', '');
  if (file.type === 'image') {
    const img = el('img');
    img.src = url;
    img.alt = 'Image the agent attached';
    img.loading = 'lazy';
    item.append(img);
  }
  item.append(link);
  list.append(item);
  const named = (name) => {
    if (!name) return;
    link.textContent = `Download ${name}${typeof file.size === 'number' ? ` (${bytes(file.size)})` : ''}`;
    link.setAttribute('download', name);
    const img = item.querySelector('img');
    if (img) img.alt = name;
  };
  // History's message_files carry Dify's filename and size; a live message_file event does not: ask the link.
  if (file.filename) named(file.filename);
  else void fileName(url).then(named);
}

/** 1234 → "1.2 kB". */
export function bytes(n) {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB'];
  let v = n / 1000;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** Sets a message's answer (Markdown), re-rendered at most once a frame while it streams. */
export function setAnswer(box, answer, error) {
  box._answer = answer;
  box._error = error;
  if (box._pending) return;
  box._pending = requestAnimationFrame(() => {
    box._pending = 0;
    paintAnswer(box);
  });
}

/** Renders the answer now (history, the end of a stream). */
export function paintAnswer(box) {
  if (box._pending) cancelAnimationFrame(box._pending);
  box._pending = 0;
  const text = box.querySelector('.text');
  renderMarkdown(text, box._answer || '');
  if (box._error) text.append(el('p', 'error-line', `Error: ${box._error}`));
  showQuestionOnce(box);
  box.dispatchEvent(new CustomEvent('rendered', { bubbles: true }));
}

/**
 * Consumes a turn's stream into a message box until its terminal event, re-attaching with Last-Event-ID if the
 * stream breaks. `hooks`: reattach(lastId) → a new response, onTask(taskId), onConversation(id), onForm(box, form),
 * onMessageId(id), onEnd(data), onKeyRevoked(data) (the stream's last event `api_key_revoked`; without it that is
 * shown as the message's error), signal (detaches). Resolves followTurn's `{ended, aborted}`.
 */
export async function consumeTurn(box, res, hooks) {
  let answer = '';
  const result = await followTurn(res, {
    reattach: hooks.reattach,
    signal: hooks.signal,
    onQueued: hooks.onQueued,
    onEvent: (event, d) => {
      if (d.task_id) hooks.onTask?.(d.task_id);
      if (d.conversation_id) hooks.onConversation?.(d.conversation_id);
      if (d.message_id || (event === 'message_end' && d.id)) hooks.onMessageId?.(d.message_id || d.id);
      if (event === 'agent_message') setAnswer(box, (answer += d.answer));
      else if (event === 'message' || event === 'message_replace') setAnswer(box, (answer = d.answer));
      else if (event === 'agent_thought') renderThought(box, d);
      else if (event === 'message_file') renderFile(box, d);
      else if (event === 'human_input_required') hooks.onForm?.(box, d.data);
      else if (event === 'error' && d.code === 'api_key_revoked' && hooks.onKeyRevoked) {
        // The stream's key was revoked: the turn is not failed (it may go on); the page says why it stopped.
        paintAnswer(box);
        hooks.onKeyRevoked(d);
      } else if (event === 'error') {
        box.classList.add('error');
        setAnswer(box, answer, d.message);
        paintAnswer(box);
      } else if (event === 'message_end') {
        paintAnswer(box);
        renderCitations(box, d.metadata?.retriever_resources);
        hooks.onEnd?.(d);
      }
    },
  });
  if (box._pending) paintAnswer(box);
  return result;
}

/** A message bubble with a place for thoughts and its text. */
export function messageBox(role, text) {
  const m = el('div', `msg ${role}`);
  m.append(el('div', 'who', role === 'user' ? 'You' : 'Agent'), el('div', 'thoughts'), el('div', 'text', role === 'user' ? text : ''));
  if (role !== 'user' && text) {
    m._answer = text;
    paintAnswer(m);
  }
  return m;
}

/**
 * The message box of both pages (the chat page's composer, the studio's debugger): Enter sends (Shift+Enter is a new
 * line, and an IME's Enter that ends a composition sends nothing), an empty text is not sent; the box is cleared unless
 * `send(text)` answers false (not sent, e.g. a turn still running).
 */
export function wireComposer(form, input, send) {
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    if (send(text) !== false) input.value = '';
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
}
