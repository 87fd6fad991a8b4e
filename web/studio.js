// The studio: an app builder's page over the console API (issue 19). Pick an agent, edit its soul config on the
// shared draft or one's own build draft (validation errors shown next to their field), publish, diff two versions,
// chat with the draft in the debugger (the chat page's rendering, web/turn-view.js: tool cards, forms, stop,
// re-attach) and inspect any turn: its agent log as a timeline, usage, errors, the backend run id and a link to the
// turn's workflow in the Temporal UI. The console key comes from the URL fragment (#key=…) or the key box and stays
// in this tab's sessionStorage.

import { forkAction } from './chat-fork.js';
import { suggestedAfterAnswer } from './chat-suggested.js';
import { renderCitations } from './citations.js';
import { createApi } from './lib/api.js';
import { pickedModel, showModel, takesSetting } from './studio-model-picker.js';
import { actionButton, consumeTurn, el, markAnswered, messageBox, renderForm, renderThought, wireComposer } from './turn-view.js';

const $ = (id) => document.getElementById(id);
const state = { key: '', appId: '', config: null, conversationId: '', taskId: '', abort: null };

// The pages' one API client (lib/api.js): the console key, Dify's error body as an error with code/status/body.
const client = createApi({ base: '/console/api', key: () => state.key });
const api = (path, init = {}) =>
  client.request(path, { ...init, headers: { 'content-type': 'application/json', ...(init.headers || {}) } });
const getJson = async (path) => (await api(path)).json();
const send = (path, body, method = 'POST') => api(path, { method, body: JSON.stringify(body ?? {}) }).then((r) => r.json());
const appPath = (p) => `/apps/${state.appId}${p}`;
const say = (text) => ($('status').textContent = text);

// --- agents --------------------------------------------------------------------------------------------------

async function loadApps() {
  if (!state.key) return;
  try {
    const { data } = await getJson('/apps?limit=100');
    const ul = $('apps');
    ul.textContent = '';
    for (const a of data) {
      const li = el('li', a.id === state.appId ? 'active' : '');
      li.dataset.app = a.id;
      li.dataset.icon = a.icon || '';
      // The name is a button, so the keyboard reaches it (Tab) and opens the app (Enter, Space); a click anywhere on
      // the row still opens it. Beside, not around, Duplicate and Delete: no control inside another.
      const name = el('button', 'app-open', a.name);
      name.type = 'button';
      if (a.id === state.appId) name.setAttribute('aria-current', 'true');
      li.append(name);
      li.addEventListener('click', () => void openApp(a));
      // Duplicate and Delete (api/console/apps.ts): icons, so the item's text stays the app's name.
      const actions = el('span', 'app-actions');
      actions.append(
        actionButton('Duplicate', (ev) => (ev.stopPropagation(), void duplicateApp(a)), {
          icon: 'copy',
          cls: 'app-duplicate',
          title: 'Duplicate',
          aria: `Duplicate ${a.name}`,
        }),
        actionButton('Delete', (ev) => (ev.stopPropagation(), askDelete(a)), {
          icon: 'trash',
          cls: 'app-delete',
          title: 'Delete',
          aria: `Delete ${a.name}`,
        }),
      );
      li.append(actions);
      ul.append(li);
    }
    // The open app is gone (deleted here or elsewhere): the first one opens instead.
    if (state.appId && !data.some((a) => a.id === state.appId)) leaveApp();
    if (!state.appId && data[0]) await openApp(data[0]);
    if (!data.length) say('This tenant has no agent apps: create one with New agent.');
    return data;
  } catch (err) {
    say(err.message);
    return [];
  }
}

/** No app is open: the agent screen's panels are hidden until one is. */
function leaveApp() {
  state.appId = '';
  state.conversationId = '';
  state.abort?.abort();
  $('agent-name').textContent = '';
  $('messages').textContent = '';
  $('inspector').hidden = true;
  for (const id of ['editor', 'debugger', 'annotations', 'multitask']) $(id).hidden = true;
}

// A copy of the app (its shared draft, icon, description; not its conversations or keys), opened like a new agent.
async function duplicateApp(a) {
  try {
    const copy = await send(`/apps/${a.id}/copy`, {});
    say(`Duplicated ${a.name} as ${copy.name}.`);
    document.dispatchEvent(new CustomEvent('studio:app-created', { detail: copy }));
  } catch (err) {
    say(err.message);
  }
}

// Delete asks first, naming the app and what goes with it; a turn still in flight is the api's 409, said as it is.
let deleting = null;
function askDelete(a) {
  deleting = a;
  $('app-confirm-text').textContent =
    `Delete “${a.name}”? Its conversations, versions, API keys, schedules, webhooks and uploads are deleted with it.`;
  $('app-confirm-yes').textContent = `Delete ${a.name}`;
  $('app-confirm').hidden = false;
  $('app-confirm-no').focus();
}
function closeDelete() {
  deleting = null;
  $('app-confirm').hidden = true;
}
async function confirmDelete() {
  const a = deleting;
  if (!a) return;
  try {
    await api(`/apps/${a.id}`, { method: 'DELETE' });
    closeDelete();
    if (a.id === state.appId) leaveApp();
    say(`Deleted ${a.name}.`);
    await loadApps();
  } catch (err) {
    closeDelete();
    say(err.message);
  }
}
$('app-confirm-yes').addEventListener('click', () => void confirmDelete());
$('app-confirm-no').addEventListener('click', closeDelete);
$('app-confirm').addEventListener('keydown', (ev) => ev.key === 'Escape' && closeDelete());

async function openApp(a) {
  state.appId = a.id;
  for (const li of $('apps').children) {
    li.classList.toggle('active', li.dataset.app === a.id);
    const open = li.querySelector('.app-open');
    if (li.dataset.app === a.id) open?.setAttribute('aria-current', 'true');
    else open?.removeAttribute('aria-current');
  }
  $('agent-name').textContent = a.name;
  for (const id of ['editor', 'debugger', 'annotations', 'multitask']) $(id).hidden = false;
  $('ann-enabled').checked = a.annotation_reply.enabled;
  $('ann-threshold').value = a.annotation_reply.score_threshold;
  await Promise.all([loadDraft(), loadVersions(), loadAnnotations(), loadMultitask(), openLastDebugConversation()]);
}

// --- the soul config editor ----------------------------------------------------------------------------------

// The builtin shelf from the api (GET /builtin-tools: core/protocol/builtin-tools.ts, the contract the agent backend runs
// them by), read once per key; the checkboxes are made from it, never from a list kept in this page.
let builtinTools = null;
function loadBuiltinTools() {
  builtinTools ??= getJson('/builtin-tools').then(
    (r) => r.data,
    (err) => {
      builtinTools = null; // the next load asks again
      throw err;
    },
  );
  return builtinTools;
}

async function loadDraft() {
  const build = $('target').value === 'build';
  let d = null;
  if (build) d = await getJson(appPath('/agent/build-draft')).catch((err) => (err.status === 404 ? null : Promise.reject(err)));
  // No build draft yet: start from the shared draft; the first save creates the build draft.
  if (!d) d = await getJson(appPath('/agent/draft'));
  const shelf = await loadBuiltinTools();
  state.config = structuredClone(d.config);
  // The debugger's conversation may have opened before the draft: its latest answer gets its questions now.
  void followUps.show([...$('messages').querySelectorAll('.msg.agent')].pop());
  const fresh = build && d.draft_type !== 'BUILD_DRAFT';
  $('merge').hidden = !build;
  $('draft-info').textContent = fresh ? 'new build draft (from the shared draft)' : `${d.draft_type} revision ${d.revision}`;
  fillForm(state.config, shelf);
  clearIssues();
  void refreshDatasetChoices();
}

// The knowledge layer's datasets, picked by name from the tenant's datasets (GET /datasets); an attached id the list
// does not know (deleted, or beyond its first 100) stays ticked under its id, so a save keeps it unless unticked.
let datasetChoices = [];
const chosenDatasets = () => [...$('f-datasets').querySelectorAll('input:checked')].map((b) => b.value);
function showDatasetChoices(chosen) {
  const box = $('f-datasets');
  box.textContent = '';
  const known = new Set(datasetChoices.map((d) => d.id));
  const all = [...datasetChoices, ...chosen.filter((id) => !known.has(id)).map((id) => ({ id, name: id }))];
  if (!all.length) box.append(el('span', 'hint', 'No datasets yet: create one in the Datasets screen.'));
  for (const d of all) {
    const label = el('label', 'check');
    const b = el('input');
    b.type = 'checkbox';
    b.value = d.id;
    b.checked = chosen.includes(d.id);
    // Ticking a dataset turns retrieval on (unticking the last one leaves the switch as it is).
    b.addEventListener('change', () => {
      if (b.checked) $('f-knowledge').checked = true;
    });
    label.append(b, ` ${d.name}`);
    box.append(label);
  }
}
/** Reloads the tenant's datasets into the picker, keeping what the form has ticked (the agent screen calls it when shown). */
async function refreshDatasetChoices() {
  try {
    const page = await getJson('/datasets?limit=100');
    datasetChoices = (page.data ?? []).map((d) => ({ id: d.id, name: d.name }));
    for (const d of datasetChoices) datasetNames.set(d.id, d.name);
  } catch {
    return;
  }
  showDatasetChoices(chosenDatasets());
}
document.addEventListener('studio:screen', (ev) => {
  if (ev.detail === 'agent' && state.appId) void refreshDatasetChoices();
});

function fillForm(c, shelf) {
  $('f-prompt').value = c.prompt?.system_prompt ?? '';
  // The catalogue picker (studio-model-picker.js): the selects hold the draft's model at once, its lists follow.
  void showModel(c.model).catch((err) => say(err.message));
  const s = c.model?.model_settings ?? {};
  $('f-temperature').value = s.temperature ?? '';
  $('f-max-tokens').value = s.max_tokens ?? '';
  $('f-top-p').value = s.top_p ?? '';
  $('f-thinking-budget').value = s.thinking_budget ?? '';
  $('f-reasoning-effort').value = s.reasoning_effort ?? '';
  $('f-stop').value = (s.stop_sequences ?? []).join('\n');
  const tools = $('f-tools');
  tools.textContent = '';
  for (const t of shelf) {
    const label = el('label', 'check');
    label.title = t.description;
    const box = el('input');
    box.type = 'checkbox';
    box.value = t.name;
    box.checked = (c.tools?.core ?? []).includes(t.name);
    label.append(box, ` ${t.name}`);
    tools.append(label);
  }
  const plugin = c.tools?.plugin ?? [];
  $('f-plugin-tools').textContent = plugin.length
    ? `Provider tools (kept as they are): ${plugin.map((t) => `${t.provider}__${t.name}`).join(', ')}`
    : '';
  $('f-ask-human').checked = !!c.ask_human?.enabled;
  $('f-knowledge').checked = !!c.knowledge?.enabled;
  showDatasetChoices(c.knowledge?.dataset_ids ?? []);
  $('f-citations').checked = c.features?.retriever_resource?.enabled !== false;
  $('f-opening').value = c.features?.opening_statement ?? '';
  $('f-suggested').value = (c.features?.suggested_questions ?? []).join('\n');
  $('f-follow-ups').checked = !!c.features?.suggested_questions_after_answer?.enabled;
  $('f-runtime').checked = !!c.runtime?.enabled;
  $('f-shell').checked = !!c.shell?.enabled;
}

/** The loaded config with the form's fields applied: whatever the form does not show is kept as it was. */
function readForm() {
  const c = structuredClone(state.config ?? {});
  c.prompt = { ...c.prompt, system_prompt: $('f-prompt').value };
  const settings = { ...(c.model?.model_settings ?? {}) };
  for (const [key, id] of [
    ['temperature', 'f-temperature'],
    ['max_tokens', 'f-max-tokens'],
    ['top_p', 'f-top-p'],
    ['thinking_budget', 'f-thinking-budget'],
  ]) {
    if ($(id).value === '') delete settings[key];
    else settings[key] = Number($(id).value);
  }
  if ($('f-reasoning-effort').value === '') delete settings.reasoning_effort;
  else settings.reasoning_effort = $('f-reasoning-effort').value;
  const stops = $('f-stop')
    .value.split('\n')
    .filter((q) => q.trim() !== '');
  if (stops.length === 0) delete settings.stop_sequences;
  else settings.stop_sequences = stops;
  // A setting the picked model does not take (its field hidden) is not sent to it.
  for (const key of Object.keys(settings)) if (!takesSetting(key)) delete settings[key];
  c.model = { ...c.model, ...pickedModel(), model_settings: settings };
  const core = [...$('f-tools').querySelectorAll('input:checked')].map((b) => b.value);
  c.tools = { ...c.tools, core };
  c.ask_human = { ...c.ask_human, enabled: $('f-ask-human').checked };
  c.knowledge = { ...c.knowledge, enabled: $('f-knowledge').checked, dataset_ids: chosenDatasets() };
  c.features = {
    ...c.features,
    retriever_resource: { enabled: $('f-citations').checked },
    suggested_questions_after_answer: { enabled: $('f-follow-ups').checked },
    opening_statement: $('f-opening').value.trim(),
    // One question a line, blank lines dropped (Dify's list of questions).
    suggested_questions: $('f-suggested')
      .value.split('\n')
      .map((q) => q.trim())
      .filter((q) => q !== ''),
  };
  c.runtime = { ...c.runtime, enabled: $('f-runtime').checked };
  c.shell = { ...c.shell, enabled: $('f-shell').checked };
  return c;
}

function clearIssues() {
  for (const e of document.querySelectorAll('#editor .field-error[data-error-for]')) e.remove();
  for (const f of document.querySelectorAll('#editor .invalid')) f.classList.remove('invalid');
  $('editor-errors').hidden = true;
  $('editor-errors').textContent = '';
}

/** 400 invalid_agent_config `issues[]`: each message next to the field whose path is the longest prefix of its path. */
function showIssues(issues) {
  clearIssues();
  const fields = [...document.querySelectorAll('#editor [data-path]')];
  for (const issue of issues) {
    const covers = (p) => issue.path === p || issue.path.startsWith(`${p}.`) || issue.path.startsWith(`${p}[`);
    const field = fields.filter((f) => covers(f.dataset.path)).sort((a, b) => b.dataset.path.length - a.dataset.path.length)[0];
    const msg = el('div', 'field-error', field ? issue.message : `${issue.path}: ${issue.message}`);
    msg.dataset.errorFor = issue.path;
    if (field) {
      field.classList.add('invalid');
      field.append(msg);
    } else {
      $('editor-errors').hidden = false;
      $('editor-errors').append(msg);
    }
  }
}

async function guarded(action) {
  try {
    await action();
  } catch (err) {
    if (err.code === 'invalid_agent_config' && Array.isArray(err.body?.issues)) {
      showIssues(err.body.issues);
      say('Not saved: fix the marked fields.');
    } else say(err.message);
  }
}

const save = () =>
  guarded(async () => {
    const build = $('target').value === 'build';
    const d = await send(appPath(build ? '/agent/build-draft' : '/agent/draft'), { config: readForm() }, 'PUT');
    state.config = d.config;
    clearIssues();
    $('draft-info').textContent = `${d.draft_type} revision ${d.revision}`;
    say(`Saved (${d.draft_type} revision ${d.revision}).`);
  });

const publish = () =>
  guarded(async () => {
    const v = await send(appPath('/agent/publish'), { from: $('target').value === 'build' ? 'build-draft' : 'draft' });
    clearIssues();
    say(`Published version ${v.version}.`);
    await loadVersions();
  });

/** The build draft into the shared draft; a conflict (someone saved the shared draft since) asks before forcing. */
const merge = () =>
  guarded(async () => {
    try {
      await send(appPath('/agent/build-draft/merge'), { force: false });
    } catch (err) {
      if (err.code !== 'agent_draft_conflict' || !confirm(`${err.message}\n\nOverwrite the shared draft with your build draft?`)) throw err;
      await send(appPath('/agent/build-draft/merge'), { force: true });
    }
    say('Merged your build draft into the shared draft.');
  });

/**
 * `{{#` in the prompt offers only what the turn's mention resolver understands (core/domain/mention-resolver.ts): the tools
 * this config offers the model, by the exact name it is offered; the knowledge layer's datasets (shown by name);
 * the sys variables. A save refuses any other mention (400 invalid_agent_config naming it).
 */
const SYS_VARIABLES = ['query', 'user_id', 'conversation_id', 'app_id', 'message_id'];
const datasetNames = new Map();
let datasetsLoaded = null;
function loadDatasetNames() {
  datasetsLoaded ??= getJson('/datasets?limit=100')
    .then((page) => {
      for (const d of page.data ?? []) datasetNames.set(d.id, d.name);
    })
    .catch(() => undefined);
  return datasetsLoaded;
}
function offeredTools(c) {
  return [
    ...(c.tools?.core ?? []),
    ...(c.tools?.plugin ?? []).map((t) => `${t.provider}__${t.name}`),
    ...(c.runtime?.enabled && c.shell?.enabled ? ['shell'] : []),
    ...(c.knowledge?.enabled && c.knowledge?.search_tool !== false ? ['knowledge_search'] : []),
    ...(c.ask_human?.enabled ? ['ask_human'] : []),
  ];
}
function suggestMentions() {
  const ta = $('f-prompt');
  const m = /\{\{#([\w.-]*)$/.exec(ta.value.slice(0, ta.selectionStart));
  const list = $('mentions');
  list.textContent = '';
  list.hidden = !m;
  if (!m) return;
  const c = readForm();
  if (c.knowledge.enabled && c.knowledge.dataset_ids.some((id) => !datasetNames.has(id)) && !datasetsLoaded)
    void loadDatasetNames().then(() => suggestMentions());
  const options = [
    ...offeredTools(c).map((n) => ({ label: `tool ${n}`, token: `tool.${n}` })),
    ...(c.knowledge.enabled ? c.knowledge.dataset_ids : []).map((id) => ({
      label: `dataset ${datasetNames.get(id) ?? id}`,
      token: `dataset.${id}`,
    })),
    ...SYS_VARIABLES.map((n) => ({ label: `sys ${n}`, token: `sys.${n}` })),
  ].filter((o) => o.token.startsWith(m[1]) || o.label.includes(m[1]));
  for (const o of options) {
    const li = el('li', '', o.label);
    li.addEventListener('mousedown', (ev) => {
      ev.preventDefault();
      const start = ta.selectionStart - m[0].length;
      ta.setRangeText(`{{#${o.token}#}}`, start, ta.selectionStart, 'end');
      list.hidden = true;
    });
    list.append(li);
  }
  list.hidden = !options.length;
}

// --- versions and their diff ---------------------------------------------------------------------------------

async function loadVersions() {
  const { data } = await getJson(appPath('/agent/versions?limit=100'));
  const ul = $('versions');
  ul.textContent = '';
  for (const s of [$('diff-a'), $('diff-b')]) s.textContent = '';
  for (const v of data) {
    const when = new Date(v.created_at * 1000).toLocaleString();
    ul.append(el('li', v.active ? 'active' : '', `v${v.version}${v.active ? ' (active)' : ''} · ${when}`));
    for (const s of [$('diff-a'), $('diff-b')]) {
      const o = el('option', '', `v${v.version}`);
      o.value = v.id;
      s.append(o);
    }
  }
  // Newest against the one before it.
  if (data.length > 1) $('diff-a').value = data[1].id;
  if (data.length) $('diff-b').value = data[0].id;
}

/** JSON with sorted keys, one value per line: the same config always reads the same. */
function stableJson(v) {
  const sort = (x) =>
    Array.isArray(x)
      ? x.map(sort)
      : x && typeof x === 'object'
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sort(x[k])]),
          )
        : x;
  return JSON.stringify(sort(v), null, 2).split('\n');
}

/** A line diff by longest common subsequence: `[' ' | '-' | '+', line]` rows. Configs are small (hundreds of lines). */
export function lineDiff(a, b) {
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push([' ', a[i++]]);
      j++;
    } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) out.push(['+', b[j++]]);
    else out.push(['-', a[i++]]);
  }
  return out;
}

async function showDiff() {
  const [a, b] = await Promise.all([$('diff-a').value, $('diff-b').value].map((id) => getJson(appPath(`/agent/versions/${id}`))));
  $('diff-title').textContent = `v${a.version} → v${b.version}`;
  const pre = $('diff-out');
  pre.textContent = '';
  const rows = lineDiff(stableJson(a.config), stableJson(b.config));
  for (const [mark, line] of rows) pre.append(el('span', mark === '+' ? 'add' : mark === '-' ? 'del' : 'same', `${mark} ${line}\n`));
  if (!rows.some(([mark]) => mark !== ' ')) pre.prepend(el('span', 'same', '(no differences)\n'));
  $('diff-view').hidden = false;
}

// --- annotations ----------------------------------------------------------------------------------------------

async function loadAnnotations() {
  const { data } = await getJson(appPath('/annotations?limit=100'));
  const ul = $('ann-list');
  ul.textContent = '';
  for (const a of data) {
    const li = el('li');
    li.append(el('strong', '', a.question), ` → ${a.content} `, el('span', 'hint', `(${a.hit_count} hits)`));
    ul.append(li);
  }
}

const addAnnotation = () =>
  guarded(async () => {
    await send(appPath('/annotations'), { question: $('ann-question').value, content: $('ann-content').value });
    $('ann-question').value = $('ann-content').value = '';
    await loadAnnotations();
  });

const applyAnnotationSettings = () =>
  guarded(async () => {
    const s = await send(
      appPath('/annotation-settings'),
      { enabled: $('ann-enabled').checked, score_threshold: Number($('ann-threshold').value || 0.8) },
      'PUT',
    );
    say(`Annotation reply ${s.enabled ? 'on' : 'off'} (threshold ${s.score_threshold}).`);
  });

// --- multitask: what a message sent during a turn does (issue 35; GET/PUT multitask-settings) ------------------

const STRATEGY_NAMES = { reject: 'Reject', enqueue: 'Queue', interrupt: 'Interrupt', rollback: 'Roll back' };

function showMultitask(s) {
  for (const r of document.querySelectorAll('input[name="mt-strategy"]')) r.checked = r.value === s.default_strategy;
  $('mt-current').textContent =
    `In use: ${STRATEGY_NAMES[s.default_strategy] ?? s.default_strategy} (at most ${s.queue_limit} messages wait per conversation).`;
}

async function loadMultitask() {
  showMultitask(await getJson(appPath('/multitask-settings')));
}

const saveMultitask = () =>
  guarded(async () => {
    const picked = document.querySelector('input[name="mt-strategy"]:checked')?.value;
    if (!picked) return say('Pick what a message sent during a turn does.');
    const s = await send(appPath('/multitask-settings'), { default_strategy: picked }, 'PUT');
    showMultitask(s);
    say(`Messages sent while the agent answers: ${STRATEGY_NAMES[s.default_strategy]}.`);
  });

// --- the debugger chat ---------------------------------------------------------------------------------------

const debugPath = (p) => appPath(`/agent/debug${p}`);
const eventsPath = (taskId) => debugPath(`/chat-messages/${taskId}/events`);

/** A message at the end of the debugger's list, which scrolls to it inside itself: the page stays where it is (issue 42
 * problem 10: scrolling the page to it opened a phone's studio at the debugger, ~1,570 px down, its tabs out of sight). */
function addMessage(role, text) {
  const m = messageBox(role, text);
  const list = $('messages');
  list.append(m);
  list.scrollTop = list.scrollHeight;
  return m;
}

/** Every agent message gets an Inspect button once its message id is known. */
function markMessage(box, messageId) {
  if (box.dataset.messageId) return;
  box.dataset.messageId = messageId;
  const b = el('button', 'inspect', 'Inspect');
  b.type = 'button';
  b.addEventListener('click', () => void inspect(messageId));
  box.querySelector('.who').append(' ', b);
}

// "Fork from here" under a finished answer, as on the chat page (chat-fork.js): the console's fork of the caller's
// debugger conversation, which then opens in the debugger (and is the one a reload opens: the newest).
const forkButton = forkAction({
  state,
  say,
  actionButton,
  request: (source, messageId) => send(debugPath(`/conversations/${source}/fork`), { message_id: messageId }),
  opened: (id) => openDebugConversation(id),
});

// Questions to ask next under the latest debugger answer, when the draft it runs on has them on (web/chat-suggested.js).
const followUps = suggestedAfterAnswer({
  questions: async (id) => (await getJson(debugPath(`/messages/${id}/suggested-questions`))).data,
  actionButton,
  send: (query) => void chat(query),
  enabled: () => !!state.config?.features?.suggested_questions_after_answer?.enabled,
  latest: () => [...$('messages').querySelectorAll('.msg.agent')].pop(),
  busy: () => !$('stop').disabled,
});

/** The actions under a finished debugger answer (the fork; Inspect is in its header). */
function addActions(box) {
  box.querySelector('.actions')?.remove();
  const fork = forkButton(box);
  if (!fork) return;
  const bar = el('div', 'actions');
  bar.append(fork);
  box.append(bar);
}

function showForm(box, form) {
  renderForm(box, form, async (inputs, action) => {
    try {
      const cont = await send(debugPath(`/forms/${form.form_token}`), { inputs, action });
      markAnswered(box);
      await follow(addMessage('agent', ''), cont.task_id);
    } catch (err) {
      say(err.message);
    }
  });
}

function consume(box, res) {
  return consumeTurn(box, res, {
    onTask: (taskId) => {
      state.taskId = taskId;
      markMessage(box, taskId);
    },
    onConversation: (id) => {
      if (!state.conversationId) state.conversationId = id;
    },
    onForm: showForm,
    // Re-attach from the last event seen, through the console's debugger events route.
    reattach: (lastId) =>
      state.taskId
        ? api(eventsPath(state.taskId), { headers: { 'last-event-id': String(lastId) } })
        : Promise.reject(new Error('stream lost')),
  });
}

async function follow(box, taskId) {
  setBusy(true);
  state.taskId = taskId;
  markMessage(box, taskId);
  try {
    await consume(box, await api(eventsPath(taskId)));
    addActions(box);
  } finally {
    setBusy(false);
    void followUps.show(box);
  }
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  say(busy ? 'The agent is working…' : '');
}

async function chat(query) {
  followUps.clear();
  addMessage('user', query);
  const box = addMessage('agent', '');
  setBusy(true);
  state.abort = new AbortController();
  try {
    const res = await api(debugPath('/chat-messages'), {
      method: 'POST',
      body: JSON.stringify({
        query,
        inputs: {},
        conversation_id: state.conversationId || undefined,
        draft: $('target').value === 'build' ? 'build' : 'draft',
      }),
      signal: state.abort.signal,
    });
    await consume(box, res);
    addActions(box);
  } catch (err) {
    box.classList.add('error');
    box.querySelector('.text').textContent = `Error: ${err.message}`;
  } finally {
    setBusy(false);
    void followUps.show(box);
    if ($('target').value === 'build') void showBuildDraftMade();
  }
}

/** The first debugger turn on "my build draft" made it from the shared draft (api/console/agent.ts): say so. */
async function showBuildDraftMade() {
  if ($('draft-info').textContent.startsWith('BUILD_DRAFT')) return;
  try {
    const d = await getJson(appPath('/agent/build-draft'));
    if ($('target').value === 'build') $('draft-info').textContent = `${d.draft_type} revision ${d.revision}`;
  } catch {
    // Not made (the turn was refused before): the info stays as it was.
  }
}

async function stop() {
  if (!state.taskId) return;
  try {
    await send(debugPath(`/chat-messages/${state.taskId}/stop`), {});
    const box = document.querySelector(`.msg.agent[data-message-id="${CSS.escape(state.taskId)}"]`);
    if (box) box.classList.add('stopped');
  } catch (err) {
    say(err.message);
  }
}

/** The account's latest debugger conversation, with a turn still running or waiting for its form re-attached. */
async function openLastDebugConversation() {
  state.conversationId = '';
  $('messages').textContent = '';
  const { data: convs } = await getJson(debugPath('/conversations?limit=1'));
  if (convs.length) await openDebugConversation(convs[0].id);
}

/** One of the account's debugger conversations: its turns as the chat page shows them (thoughts, citations, fork). */
async function openDebugConversation(id) {
  const { data } = await getJson(debugPath(`/messages?conversation_id=${id}&limit=100`));
  state.conversationId = id;
  $('messages').textContent = '';
  const boxes = new Map();
  for (const m of data) {
    if (!m.resumed_from_message_id) addMessage('user', m.query);
    else if (boxes.has(m.resumed_from_message_id)) markAnswered(boxes.get(m.resumed_from_message_id));
    const box = addMessage('agent', m.answer);
    boxes.set(m.id, box);
    markMessage(box, m.id);
    for (const t of m.agent_thoughts) renderThought(box, t);
    renderCitations(box, m.retriever_resources);
    if (m.turn_status === 'stopped') box.classList.add('stopped');
    if (m.turn_status === 'failed' && m.error) box.classList.add('error');
    if (!['paused', 'running', 'pending', 'queued'].includes(m.turn_status)) addActions(box);
  }
  const last = data.at(-1);
  if (last && ['paused', 'running', 'pending'].includes(last.turn_status)) {
    const box = boxes.get(last.id);
    box.querySelector('.text').textContent = '';
    void follow(box, last.id);
  } else if (last) void followUps.show(boxes.get(last.id));
}

// --- the turn inspector --------------------------------------------------------------------------------------

const pretty = (v) => (typeof v === 'string' ? v : JSON.stringify(v, null, 2));

function facts(dl, rows) {
  dl.textContent = '';
  for (const [k, v] of rows) if (v !== undefined && v !== null && v !== '') dl.append(el('dt', '', k), el('dd', '', String(v)));
}

async function inspect(messageId) {
  try {
    const run = await getJson(appPath(`/agent/messages/${messageId}/run`));
    const log = await getJson(appPath(`/agent/logs?conversation_id=${run.conversation_id}&message_id=${messageId}`));
    const u = run.usage || {};
    facts($('run-facts'), [
      ['message', run.message_id],
      ['status', run.turn_status],
      ['answer', run.answer],
      ['error', run.error ? `${run.error_code ?? ''} ${run.error}`.trim() : null],
      ['workflow', run.workflow_id],
      ['backend run', run.backend_run_id],
      ['tokens', u.total_tokens !== undefined ? `${u.total_tokens} (${u.prompt_tokens} prompt + ${u.completion_tokens} completion)` : null],
      ['price', u.total_price !== undefined ? `${u.total_price} ${u.currency ?? ''}` : null],
      ['latency', u.latency !== undefined ? `${Number(u.latency).toFixed(3)} s` : null],
      ['iterations', log.meta.iterations],
    ]);
    const link = $('temporal-link');
    link.hidden = !run.temporal.workflow_url;
    if (run.temporal.workflow_url) link.href = run.temporal.workflow_url;
    else link.removeAttribute('href');
    renderTimeline(log.iterations);
    renderModelInputs(await getJson(appPath(`/agent/messages/${messageId}/model-inputs`)));
    $('inspector').hidden = false;
    $('inspector').scrollIntoView({ block: 'start' });
  } catch (err) {
    say(err.message);
  }
}

const PART_NAMES = {
  system: 'System',
  history: 'History',
  user: 'User',
  knowledge: 'Knowledge',
  assistant: 'Assistant (tool calls)',
  tool_result: 'Tool result',
  tools: 'Tool definitions',
};

/** What each model request was sent (Letta ADE's context view): its parts with their token counts, each opening to its text. */
function renderModelInputs(inputs) {
  const box = $('model-inputs');
  box.textContent = '';
  for (const call of inputs.data) {
    const sec = el('section', 'model-input');
    sec.dataset.call = String(call.call_index);
    sec.append(el('h4', '', `Model request ${call.call_index + 1} · ${call.total_tokens} tokens sent`));
    const ol = el('ol', 'input-parts');
    for (const p of call.parts) {
      const li = el('li', `input-part ${p.kind}`);
      li.dataset.kind = p.kind;
      const d = el('details');
      const summary = el('summary');
      summary.append(
        el(
          'span',
          'part-kind',
          `${PART_NAMES[p.kind] ?? p.kind}${p.name ? ` · ${p.name}` : ''}${p.kind === 'history' && p.role ? ` · ${p.role}` : ''}`,
        ),
        el('span', 'part-tokens', ` ${p.tokens} tokens`),
      );
      d.append(summary, el('pre', 'part-text', p.chars > p.text.length ? `${p.text}\n… (${p.chars} characters in all)` : p.text));
      li.append(d);
      ol.append(li);
    }
    sec.append(ol);
    box.append(sec);
  }
  if (!inputs.data.length) box.append(el('p', 'hint', 'No model request recorded for this turn.'));
}

function renderTimeline(iterations) {
  const ol = $('timeline');
  ol.textContent = '';
  iterations.forEach((it, n) => {
    const li = el('li', 'iteration');
    const latency = it.latency === null ? '' : ` · ${Number(it.latency).toFixed(3)} s`;
    li.append(
      el(
        'div',
        'iteration-head',
        `Iteration ${n + 1} · ${it.tokens} tokens (${it.prompt_tokens} + ${it.completion_tokens}) · ${it.total_price} ${it.currency}${latency}`,
      ),
    );
    if (it.thought) li.append(el('div', 'iteration-thought', it.thought));
    for (const call of it.tool_calls) {
      const card = el('div', `tool-call ${call.status}`);
      card.append(el('div', 'tool-head', `${call.tool_name} · ${call.status} · ${Number(call.time_cost).toFixed(3)} s`));
      card.append(el('div', 'label', 'Input'), el('pre', 'tool-input', pretty(call.tool_input)));
      if (call.tool_output !== null) card.append(el('div', 'label', 'Output'), el('pre', 'tool-output', pretty(call.tool_output)));
      if (call.error) card.append(el('div', 'field-error', call.error));
      li.append(card);
    }
    ol.append(li);
  });
  if (!iterations.length)
    ol.append(el('li', 'hint', 'No model request recorded for this turn (answered before the backend, or not started).'));
}

// --- wiring --------------------------------------------------------------------------------------------------

function loadKey() {
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('key')) {
    sessionStorage.setItem('agent-studio-key', hash.get('key'));
    history.replaceState(null, '', location.pathname);
  }
  state.key = sessionStorage.getItem('agent-studio-key') || '';
  $('console-key').value = state.key;
  if (!state.key) $('settings').open = true;
}

$('save-key').addEventListener('click', () => {
  state.key = $('console-key').value.trim();
  sessionStorage.setItem('agent-studio-key', state.key);
  $('settings').open = false;
  state.appId = '';
  void loadApps();
});
$('target').addEventListener('change', () => void loadDraft().catch((err) => say(err.message)));
$('save').addEventListener('click', () => void save());
$('publish').addEventListener('click', () => void publish());
$('merge').addEventListener('click', () => void merge());
$('ann-add').addEventListener('click', () => void addAnnotation());
$('ann-apply').addEventListener('click', () => void applyAnnotationSettings());
$('mt-save').addEventListener('click', () => void saveMultitask());
$('diff').addEventListener('click', () => void showDiff().catch((err) => say(err.message)));
$('f-prompt').addEventListener('input', suggestMentions);
$('f-prompt').addEventListener('blur', () => ($('mentions').hidden = true));
wireComposer($('composer'), $('query'), (q) => void chat(q));
$('stop').addEventListener('click', () => void stop());
$('new-debug').addEventListener('click', () => {
  state.conversationId = '';
  $('messages').textContent = '';
});
$('close-inspector').addEventListener('click', () => ($('inspector').hidden = true));
// The logs section (studio-logs.js) opens a turn in this inspector and refreshes the annotations it added.
document.addEventListener('studio:inspect', (ev) => void inspect(ev.detail));
document.addEventListener('studio:annotations-changed', () => void loadAnnotations().catch((err) => say(err.message)));
// The New agent screen (studio-apps.js) created an app: the list shows it and the agent screen opens it on its config.
document.addEventListener('studio:app-created', (ev) => {
  state.appId = ev.detail.id;
  void loadApps().then((apps) => {
    const created = apps.find((a) => a.id === ev.detail.id);
    if (created) return openApp(created);
  });
});
// The versions screen (studio-versions.js) published a past version again: the versions list and its diff pickers follow.
document.addEventListener('studio:versions-changed', () => void loadVersions().catch((err) => say(err.message)));

loadKey();
void loadApps();
