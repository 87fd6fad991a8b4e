// How a turn looks in the browser, shared by every page that shows turns: the SSE frame parser, thoughts as
// readable tool cards, ask_human forms, and a stream consumer that re-attaches by Last-Event-ID when a stream
// breaks. Everything is rendered as text (textContent), never as HTML.

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Yields `{id, event, data}` for each SSE frame of a fetch response. */
export async function* frames(res) {
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
    if (question) row.append(el('div', 'plain', question));
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
}

/**
 * Consumes a turn's stream into a message box until its terminal event, re-attaching with Last-Event-ID if the
 * stream breaks. `hooks`: reattach(lastId) → a new response, onTask(taskId), onConversation(id), onForm(box, form).
 */
export async function consumeTurn(box, res, hooks) {
  let lastId = 0;
  let answer = '';
  let ended = false;
  const text = box.querySelector('.text');
  for (let attempt = 0; attempt < 5 && !ended; attempt++) {
    try {
      for await (const f of frames(res)) {
        if (f.id) lastId = Number(f.id);
        const d = f.data;
        if (d.task_id) hooks.onTask?.(d.task_id);
        if (d.conversation_id) hooks.onConversation?.(d.conversation_id);
        if (f.event === 'agent_message') text.textContent = answer += d.answer;
        else if (f.event === 'message' || f.event === 'message_replace') text.textContent = answer = d.answer;
        else if (f.event === 'agent_thought') renderThought(box, d);
        else if (f.event === 'human_input_required') hooks.onForm?.(box, d.data);
        else if (f.event === 'error') {
          box.classList.add('error');
          text.textContent = `${answer}${answer ? '\n' : ''}Error: ${d.message}`;
          ended = true;
        } else if (f.event === 'message_end') ended = true;
      }
    } catch (err) {
      if (err.name === 'AbortError') return;
    }
    if (!ended && hooks.reattach) res = await hooks.reattach(lastId);
    else if (!ended) return;
  }
}

/** A message bubble with a place for thoughts and its text. */
export function messageBox(role, text) {
  const m = el('div', `msg ${role}`);
  m.append(el('div', 'who', role === 'user' ? 'You' : 'Agent'), el('div', 'thoughts'), el('div', 'text', text));
  return m;
}
