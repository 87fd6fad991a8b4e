// The studio's models screen (issue 34 item 2): each model provider of the deployment with the workspace's
// credentials for it (shown masked: add, validate with a real minimal call, rotate, delete), and the model picker —
// a provider the workspace can use (its own credentials, or the deployment's) and a model from its catalogue with
// the model's features, set as the open agent's model (its draft's model.provider / model.model).

import { button, console$, count, editDraft, el, field, input, readDraft, register, say, when } from './studio-common.js';
import { fieldsOf } from './studio-model-fields.js';

const section = el('section', 'screen');
section.id = 'models-screen';
section.setAttribute('aria-labelledby', 'models-title');
section.innerHTML = `
  <h2 id="models-title">Models</h2>
  <form id="mp-pick" class="card"><h3>The agent’s model</h3><p id="mp-current" class="hint"></p></form>
  <h3>Providers and credentials</h3>
  <div id="mp-list"></div>`;

const pickProvider = input({ tag: 'select', id: 'mp-provider' });
const pickModel = input({ tag: 'select', id: 'mp-model' });
const features = el('dl', 'kv');
features.id = 'mp-features';
const useBtn = el('button', 'primary', 'Use this model');
useBtn.type = 'submit';
section.querySelector('#mp-pick').append(el('div', 'row'), features, useBtn);
section.querySelector('#mp-pick .row').append(field('Provider', pickProvider), field('Model', pickModel));
let models = [];

function showFeatures() {
  const m = models.find((x) => x.model === pickModel.value);
  features.textContent = '';
  if (!m) return;
  const f = m.features;
  const yes = Object.entries(f)
    .filter(([, v]) => v)
    .map(([k]) => k.replace('_', ' '));
  const rows = [
    ['features', yes.length ? yes.join(', ') : 'text only'],
    ['context window', m.context_window ? `${m.context_window.toLocaleString()} tokens` : '—'],
    ['max output', m.max_output ? `${m.max_output.toLocaleString()} tokens` : '—'],
    ['price', m.prices && m.prices.input !== undefined ? `${m.prices.input} in / ${m.prices.output} out per ${m.prices.per}` : '—'],
  ];
  for (const [k, v] of rows) features.append(el('dt', '', k), el('dd', '', String(v)));
}

async function loadModels(selected) {
  pickModel.textContent = '';
  models = pickProvider.value ? (await console$.get(`/model-providers/${pickProvider.value}/models`)).data : [];
  for (const m of models)
    pickModel.append(
      Object.assign(el('option', '', m.label && m.label !== m.model ? `${m.label} (${m.model})` : m.model), { value: m.model }),
    );
  if (selected && models.some((m) => m.model === selected)) pickModel.value = selected;
  showFeatures();
}
pickProvider.addEventListener('change', () => void loadModels().catch((err) => say(err.message)));
pickModel.addEventListener('change', showFeatures);
section.querySelector('#mp-pick').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const provider = pickProvider.value;
  const model = pickModel.value;
  void editDraft((c) => (c.model = { ...c.model, provider, model }))
    .then(() => {
      say(`The agent’s draft now uses ${provider} / ${model}.`);
      section.querySelector('#mp-current').textContent = `Now: ${provider} / ${model}`;
    })
    .catch((err) => say(err.message));
});

function masked(c) {
  if (!c) return 'none';
  if (c.error) return c.error;
  return Object.entries(c)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

function credentialsForm(p) {
  const inputs = fieldsOf(p.provider).map((f) => ({
    f,
    control: input({
      type: f.secret ? 'password' : (f.type ?? 'text'),
      autocomplete: 'off',
      'aria-label': `${p.provider} ${f.label}`,
      'data-field': f.key,
      ...(f.placeholder ? { placeholder: f.placeholder } : {}),
      ...(f.required ? { 'aria-required': 'true' } : {}),
    }),
  }));
  const verdict = el('span', 'hint');
  verdict.setAttribute('role', 'status');
  // Only what was typed: secrets are never filled back in (the card shows them masked).
  const creds = () => {
    const c = {};
    for (const { f, control } of inputs) {
      const v = f.secret ? control.value : control.value.trim();
      if (v) c[f.key] = v;
    }
    return c;
  };
  const form = el('div', 'row');
  form.append(
    ...inputs.map(({ f, control }) => field(f.label, control)),
    button('Validate', async () => {
      const given = creds();
      const r = await console$.post(
        `/model-providers/${p.provider}/credentials/validate`,
        Object.keys(given).length ? { credentials: given } : {},
      );
      verdict.textContent = r.valid ? 'Valid: a real call worked.' : `Not valid: ${r.error.message}`;
      verdict.className = r.valid ? 'ok' : 'field-error';
    }),
    button(
      p.credentials ? 'Rotate' : 'Add',
      async () => {
        await console$.json(`/model-providers/${p.provider}/credentials`, { method: 'PUT', json: { credentials: creds() } });
        say(`Saved the ${p.provider} credentials (checked with a real call).`);
        await load();
      },
      'primary',
    ),
  );
  if (p.credentials)
    form.append(
      button(
        'Delete',
        async () => {
          if (!confirm(`Delete the workspace’s ${p.provider} credentials?`)) return;
          await console$.del(`/model-providers/${p.provider}/credentials`);
          say(`Deleted the ${p.provider} credentials.`);
          await load();
        },
        'danger',
      ),
    );
  form.append(verdict);
  return form;
}

async function load() {
  const [{ data }, config] = await Promise.all([console$.get('/model-providers'), readDraft().catch(() => null)]);
  const list = section.querySelector('#mp-list');
  list.textContent = '';
  for (const p of data) {
    const card = el('article', 'card provider');
    card.dataset.provider = p.provider;
    const head = el('h4', '', `${p.provider} `);
    head.append(
      el(
        'span',
        p.usable ? 'badge like' : 'badge',
        p.usable ? (p.billed ? 'usable (deployment’s key, billed)' : 'usable') : 'no credentials',
      ),
    );
    card.append(head);
    card.append(
      el(
        'div',
        'masked',
        `Workspace credentials: ${masked(p.credentials)}${p.credentials_updated_at ? ` · updated ${when(p.credentials_updated_at)}` : ''} · ${count(p.models, 'model')}`,
      ),
    );
    if (fieldsOf(p.provider).length) card.append(credentialsForm(p));
    else card.append(el('p', 'hint no-credentials', 'Takes no credentials.'));
    list.append(card);
  }
  const current = config?.model ?? {};
  section.querySelector('#mp-current').textContent = current.provider ? `Now: ${current.provider} / ${current.model}` : '';
  const usable = data.filter((p) => p.usable);
  const keep = pickProvider.value || current.provider;
  pickProvider.textContent = '';
  for (const p of usable) pickProvider.append(Object.assign(el('option', '', p.provider), { value: p.provider }));
  if (usable.some((p) => p.provider === keep)) pickProvider.value = keep;
  await loadModels(pickProvider.value === current.provider ? current.model : undefined);
  if (wanted) focusCredentials(list);
}

// The agent form's "Add credentials" (studio-model-picker.js): this screen opens on that provider's form.
let wanted = '';
document.addEventListener('studio:add-credentials', (ev) => (wanted = ev.detail));
function focusCredentials(list) {
  const card = [...list.querySelectorAll('article.provider')].find((c) => c.dataset.provider === wanted);
  wanted = '';
  if (!card) return;
  card.classList.add('wanted');
  card.scrollIntoView({ block: 'start' });
  card.querySelector('input')?.focus();
}

register({ name: 'models', title: 'Models', el: section, show: load });
