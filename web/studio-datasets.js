// The studio's datasets screen (issue 34 item 2): create a dataset, upload a document with its upload progress
// (XMLHttpRequest: fetch has no upload progress), its documents a page at a time (Dify's page/limit/has_more),
// each document's indexing status (a job: waiting|parsing|indexing|completed|error, polled until it settles), a hit
// test with scores, and attaching the dataset to the open agent (knowledge on, its id in knowledge.dataset_ids).
// Issue 42: the dataset's chunk settings (PUT …/chunk-settings; they cut the documents indexed after them) and a
// document's segments (GET …/segments): each chunk's text, token count and switch, switched off or edited in place
// (PATCH …/segments/{id}: an off segment is never retrieved, an edited one is re-indexed).

import { $, button, console$, editDraft, el, field, input, readDraft, register, say, when } from './studio-common.js';

const PAGE = 5;
const SETTLED = new Set(['completed', 'error']);
const state = { datasets: [], current: null, page: 1 };

const section = el('section', 'screen');
section.id = 'datasets-screen';
section.setAttribute('aria-labelledby', 'datasets-title');
section.innerHTML = `
  <h2 id="datasets-title">Datasets</h2>
  <form id="ds-create" class="row"></form>
  <div class="split">
    <div><h3>Your datasets</h3><ul id="ds-list" class="picklist" aria-label="Datasets"></ul></div>
    <div id="ds-detail" hidden>
      <h3 id="ds-name"></h3>
      <p id="ds-attached" class="hint"></p>
      <div class="row" id="ds-actions"></div>
      <h4 id="ds-chunk-title">Chunk settings</h4>
      <form id="ds-chunk" aria-labelledby="ds-chunk-title">
        <p class="hint" id="ds-chunk-hint">Applies to documents indexed after you save: documents already indexed keep their chunks (upload one again to re-cut it).</p>
        <div class="row" id="ds-chunk-fields"></div>
        <p id="ds-chunk-status" class="hint" role="status"></p>
      </form>
      <h4>Upload a document</h4>
      <div class="row" id="ds-upload"></div>
      <progress id="ds-progress" max="100" value="0" hidden aria-label="Upload progress"></progress>
      <p id="ds-upload-status" class="hint" role="status"></p>
      <h4>Documents</h4>
      <div class="table-scroll" tabindex="0" role="region" aria-label="Documents"><table id="ds-docs"><thead><tr>
        <th scope="col">Name</th><th scope="col">Size</th><th scope="col">Indexing</th><th scope="col">Chunks</th><th scope="col">Added</th>
      </tr></thead><tbody></tbody></table></div>
      <div class="row"><span id="ds-pager"></span></div>
      <div id="ds-segments" hidden>
        <h4 id="ds-seg-title">Segments</h4>
        <p class="hint">A disabled segment is never retrieved (not by a turn, not by the hit test); an edited one is re-indexed and found by its new text.</p>
        <ol id="ds-seg-list" class="segments" aria-labelledby="ds-seg-title"></ol>
        <div class="row"><span id="ds-seg-pager"></span></div>
      </div>
      <h4>Hit test</h4>
      <form id="ds-hit" class="row"></form>
      <ol id="ds-hits" class="hits"></ol>
    </div>
  </div>`;

const nameInput = input({ id: 'ds-new-name', required: '', placeholder: 'Product handbook', maxlength: '100' });
const createBtn = el('button', 'primary', 'Create dataset');
createBtn.type = 'submit';
section.querySelector('#ds-create').append(field('New dataset', nameInput), createBtn);
const fileInput = input({ type: 'file', id: 'ds-file', accept: '.txt,.md,.markdown,.pdf,.html,.htm,.csv,.json,.docx' });
section.querySelector('#ds-upload').append(
  field('File', fileInput),
  button('Upload', () => upload(), 'primary'),
);
const hitQuery = input({ id: 'ds-hit-query', required: '', placeholder: 'a question' });
const hitBtn = el('button', '', 'Test retrieval');
hitBtn.type = 'submit';
section.querySelector('#ds-hit').append(field('Query', hitQuery), hitBtn);

const maxChars = input({ id: 'ds-max-chars', type: 'number', min: '100', max: '4000', step: '1', required: '' });
const overlapChars = input({ id: 'ds-overlap', type: 'number', min: '0', max: '1000', step: '1', required: '' });
const separators = input({ tag: 'textarea', id: 'ds-separators', rows: '2', placeholder: '\\n---\\n' });
const chunkSave = el('button', '', 'Save chunk settings');
chunkSave.type = 'submit';
section
  .querySelector('#ds-chunk-fields')
  .append(
    field('Chunk size (characters)', maxChars),
    field('Overlap (characters)', overlapChars),
    field('Separators (one a line; \\n is a line break)', separators),
    chunkSave,
  );

const path = (p = '') => `/datasets/${state.current.id}${p}`;

async function loadDatasets() {
  const page = await console$.get('/datasets?limit=100');
  state.datasets = page.data;
  const ul = section.querySelector('#ds-list');
  ul.textContent = '';
  for (const d of page.data) {
    const b = el(
      'button',
      d.id === state.current?.id ? 'link active' : 'link',
      `${d.name} (${d.document_count ?? 0} ${d.document_count === 1 ? 'document' : 'documents'})`,
    );
    b.type = 'button';
    b.addEventListener('click', () => void open(d).catch((err) => say(err.message)));
    const li = el('li');
    li.append(b);
    ul.append(li);
  }
  if (!page.data.length) ul.append(el('li', 'hint', 'No dataset yet: create one above.'));
}

async function open(d) {
  state.current = d;
  state.page = 1;
  section.querySelector('#ds-detail').hidden = false;
  section.querySelector('#ds-name').textContent = d.name;
  section.querySelector('#ds-hits').textContent = '';
  section.querySelector('#ds-segments').hidden = true;
  section.querySelector('#ds-chunk-status').textContent = '';
  showChunkSettings(d.chunk_settings);
  await Promise.all([loadDocuments(), showAttached(), loadDatasets()]);
}

async function showAttached() {
  const c = await readDraft().catch(() => null);
  const on = !!c?.knowledge?.enabled && (c.knowledge.dataset_ids ?? []).includes(state.current.id);
  section.querySelector('#ds-attached').textContent = on
    ? 'The agent’s draft retrieves from this dataset.'
    : 'The agent’s draft does not use this dataset yet.';
  const actions = section.querySelector('#ds-actions');
  actions.textContent = '';
  actions.append(
    on ? button('Detach from the agent', () => attach(false)) : button('Attach to the agent', () => attach(true), 'primary'),
    button('Delete dataset', () => remove(), 'danger'),
  );
}

async function attach(on) {
  const id = state.current.id;
  await editDraft((c) => {
    const ids = new Set(c.knowledge?.dataset_ids ?? []);
    if (on) ids.add(id);
    else ids.delete(id);
    c.knowledge = { ...c.knowledge, enabled: on ? true : ids.size > 0 && !!c.knowledge?.enabled, dataset_ids: [...ids] };
  });
  say(on ? `Attached ${state.current.name} to the agent’s draft.` : `Detached ${state.current.name}.`);
  await showAttached();
}

async function remove() {
  if (!confirm(`Delete the dataset ${state.current.name} and its documents?`)) return;
  await console$.del(path());
  say(`Deleted ${state.current.name}.`);
  state.current = null;
  section.querySelector('#ds-detail').hidden = true;
  await loadDatasets();
}

async function loadDocuments() {
  const page = await console$.get(path(`/documents?page=${state.page}&limit=${PAGE}`));
  const tbody = section.querySelector('#ds-docs tbody');
  tbody.textContent = '';
  for (const d of page.data) {
    const tr = el('tr', d.indexing_status === 'error' ? 'failed' : '');
    tr.dataset.document = d.id;
    const status = el('td');
    status.append(el('span', `badge ${d.indexing_status}`, d.indexing_status));
    if (d.error) status.append(el('div', 'field-error', d.error));
    const chunks = el('td', '', String(d.chunk_count ?? 0));
    if (d.chunk_count) {
      const b = button('Segments', () => openSegments(d), 'link');
      b.setAttribute('aria-label', `Segments of ${d.name}`);
      chunks.append(' ', b);
    }
    tr.append(el('td', '', d.name), el('td', '', `${Math.ceil(d.size / 1024)} KB`), status, chunks);
    tr.append(el('td', '', when(d.created_at)));
    tbody.append(tr);
    if (!SETTLED.has(d.indexing_status)) void pollIndexing(d.id);
  }
  if (!page.data.length) {
    const tr = el('tr');
    const td = el('td', 'hint', 'No documents yet.');
    td.colSpan = 5;
    tr.append(td);
    tbody.append(tr);
  }
  const pager = section.querySelector('#ds-pager');
  pager.textContent = '';
  const pages = Math.max(1, Math.ceil(page.total / page.limit));
  const prev = button('Previous', () => ((state.page -= 1), loadDocuments()));
  prev.disabled = page.page <= 1;
  const next = button('Next', () => ((state.page += 1), loadDocuments()));
  next.disabled = !page.has_more;
  pager.append(
    prev,
    el('span', 'hint', ` page ${page.page} of ${pages} (${page.total} ${page.total === 1 ? 'document' : 'documents'}) `),
    next,
  );
}

const polling = new Set();
/** The indexing job's status until it settles, then the documents again (chunk counts). */
async function pollIndexing(docId) {
  if (polling.has(docId)) return;
  polling.add(docId);
  const datasetId = state.current.id;
  try {
    for (let i = 0; i < 120; i++) {
      await new Promise((r) => setTimeout(r, 500));
      if (state.current?.id !== datasetId) return;
      const { data } = await console$.get(`/datasets/${datasetId}/documents/${docId}/indexing-status`);
      const s = data[0];
      const badge = section.querySelector(`tr[data-document="${CSS.escape(docId)}"] .badge`);
      if (badge) {
        badge.className = `badge ${s.indexing_status}`;
        badge.textContent = s.indexing_status;
      }
      if (SETTLED.has(s.indexing_status)) break;
    }
  } finally {
    polling.delete(docId);
  }
  if (state.current?.id === datasetId) await loadDocuments();
}

/** multipart `file` to POST …/documents with the upload's progress; 201/200 indexed, 202 indexing. */
function upload() {
  const file = fileInput.files[0];
  if (!file) return say('Choose a file to upload.');
  const bar = section.querySelector('#ds-progress');
  const status = section.querySelector('#ds-upload-status');
  const form = new FormData();
  form.append('file', file, file.name);
  const xhr = new XMLHttpRequest();
  xhr.open('POST', `/console/api${path('/documents')}`);
  xhr.setRequestHeader('authorization', `Bearer ${sessionStorage.getItem('agent-studio-key') || ''}`);
  bar.hidden = false;
  bar.value = 0;
  status.textContent = `Uploading ${file.name}…`;
  xhr.upload.addEventListener('progress', (ev) => {
    if (ev.lengthComputable) bar.value = Math.round((ev.loaded / ev.total) * 100);
    status.textContent = `Uploading ${file.name}: ${bar.value}%`;
  });
  return new Promise((resolve) => {
    xhr.addEventListener('loadend', () => {
      let body = {};
      try {
        body = JSON.parse(xhr.responseText || '{}');
      } catch {
        /* not JSON */
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        bar.value = 100;
        status.textContent =
          xhr.status === 202 ? `${file.name} uploaded; indexing (${body.indexing_status})…` : `${file.name}: ${body.indexing_status}.`;
        fileInput.value = '';
      } else status.textContent = `Upload failed: ${body.message || `HTTP ${xhr.status || 'network error'}`}`;
      resolve(Promise.all([loadDocuments(), loadDatasets()]).catch((err) => say(err.message)));
    });
    xhr.send(form);
  });
}

// --- chunk settings -------------------------------------------------------------------------------------------

/** A separator as typed on one line: `\n` and `\t` are a line break and a tab (a separator may span lines). */
const unescape = (line) => line.replace(/\\(n|t|\\)/g, (_, c) => (c === 'n' ? '\n' : c === 't' ? '\t' : '\\'));
const escape = (sep) => sep.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\t/g, '\\t');

function showChunkSettings(s) {
  maxChars.value = s?.max_chars ?? '';
  overlapChars.value = s?.overlap_chars ?? '';
  separators.value = (s?.separators ?? []).map(escape).join('\n');
}

async function saveChunkSettings() {
  const status = section.querySelector('#ds-chunk-status');
  const body = {
    max_chars: Number(maxChars.value),
    overlap_chars: Number(overlapChars.value),
    separators: separators.value
      .split('\n')
      .filter((l) => l !== '')
      .map(unescape),
  };
  try {
    const saved = await console$.json(path('/chunk-settings'), { method: 'PUT', json: body });
    state.current = saved;
    showChunkSettings(saved.chunk_settings);
    status.textContent = `Saved: chunks of at most ${saved.chunk_settings.max_chars} characters, overlapping by ${saved.chunk_settings.overlap_chars}, for documents indexed from now on.`;
  } catch (err) {
    status.textContent = `Not saved: ${err.message}`;
  }
}

// --- a document's segments ------------------------------------------------------------------------------------

const SEG_PAGE = 20;
const segs = { doc: null, page: 1 };

async function openSegments(doc) {
  segs.doc = doc;
  segs.page = 1;
  section.querySelector('#ds-segments').hidden = false;
  section.querySelector('#ds-seg-title').textContent = `Segments of ${doc.name}`;
  await loadSegments();
  section.querySelector('#ds-segments').scrollIntoView({ block: 'nearest' });
}

const segPath = (p = '') => path(`/documents/${segs.doc.id}/segments${p}`);

async function loadSegments() {
  const page = await console$.get(segPath(`?page=${segs.page}&limit=${SEG_PAGE}`));
  const ol = section.querySelector('#ds-seg-list');
  ol.textContent = '';
  for (const s of page.data) ol.append(segmentItem(s));
  if (!page.data.length) ol.append(el('li', 'hint', 'This document has no segments.'));
  const pager = section.querySelector('#ds-seg-pager');
  pager.textContent = '';
  const pages = Math.max(1, Math.ceil(page.total / page.limit));
  const prev = button('Previous', () => ((segs.page -= 1), loadSegments()));
  prev.disabled = page.page <= 1;
  const next = button('Next', () => ((segs.page += 1), loadSegments()));
  next.disabled = !page.has_more;
  pager.append(
    prev,
    el('span', 'hint', ` page ${page.page} of ${pages} (${page.total} ${page.total === 1 ? 'segment' : 'segments'}) `),
    next,
  );
}

/** One chunk: its number, token and character counts, whether it is retrieved, its text, and its two actions. */
function segmentItem(s) {
  const li = el('li', s.enabled ? 'segment' : 'segment disabled');
  li.dataset.segment = s.id;
  const head = el('div', 'seg-head');
  head.append(
    el('strong', '', `#${s.position + 1}`),
    el('span', 'seg-tokens', ` ${s.token_count} ${s.token_count === 1 ? 'token' : 'tokens'}`),
    el('span', 'hint', ` · ${s.char_count} characters `),
    el('span', `badge ${s.enabled ? 'completed' : 'off'}`, s.enabled ? 'enabled' : 'disabled'),
  );
  const text = el('div', 'seg-text', s.content);
  const actions = el('div', 'row seg-actions');
  const n = `segment ${s.position + 1}`;
  const toggle = button(s.enabled ? 'Disable' : 'Enable', () =>
    patchSegment(s, { enabled: !s.enabled }, `${s.enabled ? 'Disabled' : 'Enabled'} ${n}.`),
  );
  toggle.setAttribute('aria-label', `${s.enabled ? 'Disable' : 'Enable'} ${n}`);
  const edit = button('Edit', () => editSegment(li, s));
  edit.setAttribute('aria-label', `Edit ${n}`);
  actions.append(toggle, edit);
  li.append(head, text, actions);
  return li;
}

function editSegment(li, s) {
  const form = el('form', 'seg-edit');
  const area = input({ tag: 'textarea', rows: '4', required: '', maxlength: '20000' });
  area.value = s.content;
  area.setAttribute('aria-label', `Text of segment ${s.position + 1}`);
  const save = el('button', 'primary', 'Save segment');
  save.type = 'submit';
  form.append(area, el('div', 'row'));
  form.lastChild.append(
    save,
    button('Cancel', () => li.replaceWith(segmentItem(s))),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void patchSegment(s, { content: area.value }, `Saved segment ${s.position + 1}: re-indexed.`);
  });
  li.querySelector('.seg-text').replaceWith(form);
  li.querySelector('.seg-actions').hidden = true;
  area.focus();
}

async function patchSegment(s, body, done) {
  const saved = await console$.json(segPath(`/${s.id}`), { method: 'PATCH', json: body });
  section.querySelector(`#ds-seg-list li[data-segment="${CSS.escape(s.id)}"]`)?.replaceWith(segmentItem(saved));
  say(done);
}

async function hitTest() {
  const ol = section.querySelector('#ds-hits');
  // Busy until this query's results replace the last ones (a screen reader and a test both wait for the answer).
  ol.setAttribute('aria-busy', 'true');
  try {
    const r = await console$.post(path('/retrieve'), { query: hitQuery.value.trim(), top_k: 5 });
    ol.textContent = '';
    for (const c of r.chunks) {
      const li = el('li');
      li.append(el('span', 'score', c.score.toFixed(3)), el('strong', '', ` ${c.document_name} `), el('div', 'chunk', c.content));
      ol.append(li);
    }
    if (!r.chunks.length) ol.append(el('li', 'hint', 'Nothing retrieved for this query.'));
  } finally {
    ol.setAttribute('aria-busy', 'false');
  }
}

section.querySelector('#ds-create').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void console$
    .post('/datasets', { name: nameInput.value.trim() })
    .then(async (d) => {
      nameInput.value = '';
      say(`Created the dataset ${d.name}.`);
      await open(d);
    })
    .catch((err) => say(err.message));
});
section.querySelector('#ds-chunk').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void saveChunkSettings();
});
section.querySelector('#ds-hit').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void hitTest().catch((err) => say(err.message));
});

register({
  name: 'datasets',
  title: 'Datasets',
  el: section,
  show: () => loadDatasets().then(() => (state.current ? Promise.all([loadDocuments(), showAttached()]) : undefined)),
});
void $;
