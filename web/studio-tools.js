// The studio's tool providers screen (issue 34 item 2): import an API tool provider from an OpenAPI 3 document (its
// operations previewed before the import: a JSON document is read in the page, YAML is listed once imported), connect
// an MCP server (its tools listed; refresh lists them again), each provider's credentials shown masked and replaced,
// and the tools the open agent uses chosen per tool (its draft's tools.plugin).

import { button, console$, count, editDraft, el, field, input, readDraft, register, say } from './studio-common.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

const section = el('section', 'screen');
section.id = 'tools-screen';
section.setAttribute('aria-labelledby', 'tools-title');
section.innerHTML = `
  <h2 id="tools-title">Tool providers</h2>
  <div class="split">
    <form id="tp-openapi" class="card"><h3>Import an OpenAPI tool</h3></form>
    <form id="tp-mcp" class="card"><h3>Connect an MCP server</h3></form>
  </div>
  <h3>Providers <small class="hint">(tick the tools the agent’s draft may call)</small></h3>
  <div id="tp-list"></div>`;

// --- OpenAPI import with a preview ----------------------------------------------------------------------------

const oaName = input({ id: 'tp-oa-name', required: '', placeholder: 'weather', pattern: '[a-z][a-z0-9_]*' });
const oaUrl = input({ id: 'tp-oa-url', type: 'url', placeholder: 'https://api.example.com (default: the document’s server)' });
const oaDoc = input({ tag: 'textarea', id: 'tp-oa-doc', rows: '8', required: '', placeholder: '{"openapi": "3.0.0", …} or YAML' });
const oaAuth = input({ tag: 'select', id: 'tp-oa-auth' });
for (const [v, t] of [
  ['none', 'no auth'],
  ['bearer', 'Bearer token'],
  ['api_key_header', 'API key header'],
  ['api_key_query', 'API key query parameter'],
])
  oaAuth.append(Object.assign(el('option', '', t), { value: v }));
const oaAuthName = input({ id: 'tp-oa-auth-name', placeholder: 'X-API-Key' });
const oaSecret = input({ id: 'tp-oa-secret', type: 'password', autocomplete: 'off' });
const preview = el('ul', 'preview');
preview.id = 'tp-oa-preview';
preview.setAttribute('aria-label', 'Operations in the document');
const oaSubmit = el('button', 'primary', 'Import');
oaSubmit.type = 'submit';
section
  .querySelector('#tp-openapi')
  .append(
    field('Provider name', oaName),
    field('OpenAPI document', oaDoc),
    el('div', 'hint', 'Operations the agent will be offered:'),
    preview,
    field('Server URL', oaUrl),
    field('Auth', oaAuth),
    field('Header or parameter name', oaAuthName),
    field('Secret', oaSecret),
    oaSubmit,
  );

/** The document's operations as the import will offer them (operationId, method, path, summary). */
export function operationsOf(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const ops = [];
  for (const [p, item] of Object.entries(doc?.paths ?? {}))
    for (const m of METHODS)
      if (item?.[m]) ops.push({ id: item[m].operationId ?? '', method: m.toUpperCase(), path: p, summary: item[m].summary ?? '' });
  return ops;
}

function showPreview() {
  preview.textContent = '';
  const text = oaDoc.value.trim();
  if (!text) return;
  const ops = operationsOf(text);
  if (!ops) return void preview.append(el('li', 'hint', 'Not JSON: a YAML document’s operations are listed once it is imported.'));
  if (!ops.length) return void preview.append(el('li', 'field-error', 'The document has no operations.'));
  for (const o of ops) {
    const li = el('li');
    li.append(el('code', '', o.id || '(no operationId)'), ` ${o.method} ${o.path}`, o.summary ? el('span', 'hint', ` — ${o.summary}`) : '');
    preview.append(li);
  }
}
oaDoc.addEventListener('input', showPreview);
/** Only what the chosen auth needs: a name for a header or query key, a secret unless there is no auth. */
function showAuthFields() {
  oaAuthName.closest('label').hidden = !['api_key_header', 'api_key_query'].includes(oaAuth.value);
  oaSecret.closest('label').hidden = oaAuth.value === 'none';
}
oaAuth.addEventListener('change', showAuthFields);
showAuthFields();

function authBody() {
  const type = oaAuth.value;
  if (type === 'none') return { type };
  if (type === 'bearer') return { type, secret: oaSecret.value };
  return { type, name: oaAuthName.value.trim(), secret: oaSecret.value };
}

section.querySelector('#tp-openapi').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = oaDoc.value.trim();
  let openapi = text;
  try {
    openapi = JSON.parse(text);
  } catch {
    /* YAML: sent as text */
  }
  void console$
    .post('/tool-providers', {
      kind: 'api',
      name: oaName.value.trim(),
      openapi,
      ...(oaUrl.value.trim() ? { server_url: oaUrl.value.trim() } : {}),
      auth: authBody(),
    })
    .then(async (p) => {
      say(`Imported ${p.name}: ${count(p.tools.length, 'tool')}.`);
      oaSecret.value = '';
      await loadProviders();
    })
    .catch((err) => say(err.message));
});

// --- MCP -------------------------------------------------------------------------------------------------------

const mcpName = input({ id: 'tp-mcp-name', required: '', placeholder: 'docs', pattern: '[a-z][a-z0-9_]*' });
const mcpUrl = input({ id: 'tp-mcp-url', type: 'url', required: '', placeholder: 'https://mcp.example.com/mcp' });
const mcpAuth = input({ id: 'tp-mcp-auth', type: 'password', autocomplete: 'off', placeholder: 'Bearer …' });
const mcpSubmit = el('button', 'primary', 'Connect');
mcpSubmit.type = 'submit';
section
  .querySelector('#tp-mcp')
  .append(field('Provider name', mcpName), field('Server URL', mcpUrl), field('Authorization header (optional)', mcpAuth), mcpSubmit);
section.querySelector('#tp-mcp').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void console$
    .post('/tool-providers', {
      kind: 'mcp',
      name: mcpName.value.trim(),
      server_url: mcpUrl.value.trim(),
      headers: mcpAuth.value ? { Authorization: mcpAuth.value } : {},
    })
    .then(async (p) => {
      say(`Connected ${p.name}: ${count(p.tools.length, 'tool')}.`);
      mcpAuth.value = '';
      await loadProviders();
    })
    .catch((err) => say(err.message));
});

// --- the providers, their credentials and the agent's choice -------------------------------------------------

function authText(p) {
  if (p.auth.headers)
    return (
      Object.entries(p.auth.headers)
        .map(([h, v]) => `${h}: ${v}`)
        .join(', ') || 'no headers'
    );
  if (p.auth.type === 'none') return 'no auth';
  return `${p.auth.type}${p.auth.name ? ` ${p.auth.name}` : ''}: ${p.auth.secret ?? ''}`;
}

async function loadProviders() {
  const [page, config] = await Promise.all([console$.get('/tool-providers?limit=100'), readDraft().catch(() => null)]);
  const used = new Set((config?.tools?.plugin ?? []).map((t) => `${t.provider}__${t.name}`));
  const list = section.querySelector('#tp-list');
  list.textContent = '';
  for (const p of page.data) {
    const card = el('article', 'card provider');
    card.dataset.provider = p.name;
    const head = el('h4', '', `${p.name} `);
    head.append(el('span', 'badge', p.kind === 'mcp' ? 'MCP' : 'OpenAPI'));
    card.append(head, el('div', 'hint', p.server_url));
    const cred = el('div', 'row');
    cred.append(el('span', 'masked', `Credentials: ${authText(p)}`));
    const secret = input({ type: 'password', autocomplete: 'off', 'aria-label': `New secret for ${p.name}` });
    cred.append(
      secret,
      button('Replace', async () => {
        const body = p.kind === 'mcp' ? { headers: { Authorization: secret.value } } : { auth: { ...p.auth, secret: secret.value } };
        await console$.json(`/tool-providers/${p.name}/credentials`, { method: 'PUT', json: body });
        say(`Replaced the credentials of ${p.name}.`);
        await loadProviders();
      }),
    );
    if (p.kind === 'mcp')
      cred.append(
        button('Refresh tools', async () => {
          const r = await console$.post(`/tool-providers/${p.name}/refresh`, {});
          say(`${p.name}: ${count(r.tools.length, 'tool')}.`);
          await loadProviders();
        }),
      );
    cred.append(
      button(
        'Delete',
        async () => {
          if (!confirm(`Delete the tool provider ${p.name}?`)) return;
          await console$.del(`/tool-providers/${p.name}`);
          await loadProviders();
        },
        'danger',
      ),
    );
    card.append(cred);
    const tools = el('fieldset', 'tools');
    tools.append(el('legend', '', 'Tools'));
    for (const t of p.tools) {
      const label = el('label', 'check');
      const box = input({ type: 'checkbox', value: t.name });
      box.checked = used.has(t.model_name);
      box.dataset.tool = t.model_name;
      box.addEventListener('change', () => void choose(p, t, box.checked).catch((err) => ((box.checked = !box.checked), say(err.message))));
      label.append(box, ` ${t.name}`, t.description ? el('span', 'hint', ` — ${t.description}`) : '');
      tools.append(label);
    }
    if (!p.tools.length) tools.append(el('div', 'hint', 'No tools.'));
    card.append(tools);
    list.append(card);
  }
  if (!page.data.length) list.append(el('p', 'hint', 'No tool providers yet.'));
}

async function choose(p, t, on) {
  await editDraft((c) => {
    const plugin = (c.tools?.plugin ?? []).filter((x) => !(x.provider === p.name && x.name === t.name));
    if (on) plugin.push({ provider: p.name, name: t.name, description: t.description ?? '', parameters: t.parameters });
    c.tools = { ...c.tools, plugin };
  });
  say(on ? `The agent’s draft may call ${t.model_name}.` : `The agent’s draft no longer calls ${t.model_name}.`);
}

register({ name: 'tools', title: 'Tools', el: section, show: loadProviders });
