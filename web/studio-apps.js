// The studio's "New agent" screen (issue 34 item 2): an agent app from a name, an icon and description, a model the
// workspace can use (the models screen's providers and catalogue) and its first system prompt, through
// POST /console/api/apps (checked as a draft save is: the 400's issues shown next to their field). The new app opens
// in the agent screen, on its config.

import { button, console$, el, field, input, register, say } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'new-app-screen';
section.setAttribute('aria-labelledby', 'new-app-title');
section.innerHTML = `
  <h2 id="new-app-title">New agent</h2>
  <form id="na-form" class="card" novalidate></form>`;

const form = section.querySelector('#na-form');
const name = input({ id: 'na-name', maxlength: '100', required: '', placeholder: 'Support agent' });
const icon = input({ id: 'na-icon', maxlength: '16', value: '🤖', size: '4' });
const description = input({ tag: 'textarea', id: 'na-description', rows: '2', maxlength: '400' });
const provider = input({ tag: 'select', id: 'na-provider' });
const model = input({ tag: 'select', id: 'na-model' });
const prompt = input({ tag: 'textarea', id: 'na-prompt', rows: '6' });
prompt.value = 'You are a helpful agent. Answer briefly.';
const errors = el('div', 'field-error');
errors.id = 'na-errors';
errors.hidden = true;
const create = el('button', 'primary', 'Create agent');
create.type = 'submit';

/** Each field with the issue paths it shows (the longest prefix wins, as on the agent screen). */
const fields = [
  { path: 'name', label: field('Name', name) },
  { path: 'icon', label: field('Icon (an emoji)', icon) },
  { path: 'description', label: field('Description', description) },
  { path: 'model.provider', label: field('Model provider', provider) },
  { path: 'model', label: field('Model', model) },
  { path: 'prompt', label: field('First prompt (the system prompt)', prompt) },
];
const row = el('div', 'row');
row.append(fields[0].label, fields[1].label);
const modelRow = el('div', 'row');
modelRow.append(fields[3].label, fields[4].label);
form.append(row, fields[2].label, modelRow, fields[5].label, errors, create);

let models = [];
async function loadModels() {
  model.textContent = '';
  models = provider.value ? (await console$.get(`/model-providers/${provider.value}/models`)).data : [];
  for (const m of models)
    model.append(Object.assign(el('option', '', m.label && m.label !== m.model ? `${m.label} (${m.model})` : m.model), { value: m.model }));
}
provider.addEventListener('change', () => void loadModels().catch((err) => say(err.message)));

async function load() {
  clearIssues();
  const { data } = await console$.get('/model-providers');
  const keep = provider.value || 'demo';
  provider.textContent = '';
  for (const p of data.filter((x) => x.usable)) provider.append(Object.assign(el('option', '', p.provider), { value: p.provider }));
  if ([...provider.options].some((o) => o.value === keep)) provider.value = keep;
  await loadModels();
}

function clearIssues() {
  for (const e of form.querySelectorAll('.field-error[data-error-for]')) e.remove();
  for (const f of form.querySelectorAll('.invalid')) f.classList.remove('invalid');
  errors.hidden = true;
  errors.textContent = '';
}

/** The body's issues: zod's `invalid_param` (`name: …`) or `invalid_agent_config` `issues[]` ({path, message}). */
function showIssues(issues) {
  clearIssues();
  for (const issue of issues) {
    const covers = (p) => issue.path === p || issue.path.startsWith(`${p}.`) || issue.path.startsWith(`${p}[`);
    const f = fields.filter((x) => covers(x.path)).sort((a, b) => b.path.length - a.path.length)[0];
    const msg = el('div', 'field-error', f ? issue.message : `${issue.path}: ${issue.message}`);
    msg.dataset.errorFor = issue.path;
    if (f) {
      f.label.classList.add('invalid');
      f.label.after(msg);
    } else {
      errors.hidden = false;
      errors.append(msg);
    }
  }
}

form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (!name.value.trim()) return showIssues([{ path: 'name', message: 'Give the agent a name.' }]);
  create.disabled = true;
  const body = {
    name: name.value.trim(),
    icon: icon.value.trim() || undefined,
    description: description.value.trim(),
    model: provider.value && model.value ? { provider: provider.value, model: model.value } : undefined,
    system_prompt: prompt.value,
  };
  void console$
    .post('/apps', body)
    .then((app) => {
      clearIssues();
      name.value = '';
      description.value = '';
      say(`Created the agent ${app.name}.`);
      // studio.js opens it; the navigation shows the agent screen with its config.
      document.dispatchEvent(new CustomEvent('studio:app-created', { detail: app }));
      document.querySelector('#screens button[data-screen="agent"]')?.click();
    })
    .catch((err) => {
      if (Array.isArray(err.body?.issues)) {
        showIssues(
          err.body.issues.map((i) => ({ path: Array.isArray(i.path) ? i.path.join('.') : String(i.path ?? ''), message: i.message })),
        );
        say('Not created: fix the marked fields.');
      } else if (err.code === 'app_name_taken') {
        showIssues([{ path: 'name', message: err.message }]);
        say(err.message);
      } else say(err.message);
    })
    .finally(() => (create.disabled = false));
});

// The agents list offers it too.
const aside = document.getElementById('apps');
aside?.before(button('New agent', () => document.querySelector('#screens button[data-screen="new-app"]')?.click(), 'new-app'));

register({ name: 'new-app', title: 'New agent', el: section, show: load });
