// The studio's datasets screen (issue 34 item 2): create a dataset, upload a document with its upload progress
// (XMLHttpRequest: fetch has no upload progress), its documents a page at a time (Dify's page/limit/has_more),
// each document's indexing status (a job: waiting|parsing|indexing|completed|error, polled until it settles), a hit
// test with scores, and attaching the dataset to the open agent (knowledge on, its id in knowledge.dataset_ids).

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
      <h4>Upload a document</h4>
      <div class="row" id="ds-upload"></div>
      <progress id="ds-progress" max="100" value="0" hidden aria-label="Upload progress"></progress>
      <p id="ds-upload-status" class="hint" role="status"></p>
      <h4>Documents</h4>
      <div class="table-scroll" tabindex="0" role="region" aria-label="Documents"><table id="ds-docs"><thead><tr>
        <th scope="col">Name</th><th scope="col">Size</th><th scope="col">Indexing</th><th scope="col">Chunks</th><th scope="col">Added</th>
      </tr></thead><tbody></tbody></table></div>
      <div class="row"><span id="ds-pager"></span></div>
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
    tr.append(el('td', '', d.name), el('td', '', `${Math.ceil(d.size / 1024)} KB`), status, el('td', '', String(d.chunk_count ?? 0)));
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

async function hitTest() {
  const r = await console$.post(path('/retrieve'), { query: hitQuery.value.trim(), top_k: 5 });
  const ol = section.querySelector('#ds-hits');
  ol.textContent = '';
  for (const c of r.chunks) {
    const li = el('li');
    li.append(el('span', 'score', c.score.toFixed(3)), el('strong', '', ` ${c.document_name} `), el('div', 'chunk', c.content));
    ol.append(li);
  }
  if (!r.chunks.length) ol.append(el('li', 'hint', 'Nothing retrieved for this query.'));
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
