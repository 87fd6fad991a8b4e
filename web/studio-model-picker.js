// The agent form's model picker (issue 42 problem 3): the provider and the model are picked from the catalogue
// (GET /model-providers, GET /model-providers/{p}/models) instead of typed, and the model's settings fields follow
// what the chosen model declares (its `parameters`): no temperature on a model that takes none, a thinking budget only
// on a reasoning model whose provider takes one (from 1024 on Anthropic), a reasoning effort only on one that takes
// that, max tokens bounded by the model's max output, temperature and top P disabled while a thinking budget is filled
// where the provider drops them then. A provider the workspace cannot use yet (no credentials of its
// own, not hosted by the deployment) is listed as "add credentials", and picking it offers the Models screen's
// credential form for it. studio.js fills it from the draft (showModel) and reads it back (pickedModel, takesSetting).

import { console$, el, say } from './studio-common.js';

const $ = (id) => document.getElementById(id);
/** The settings fields the picker shows or hides, by `model_settings` key. */
const SETTINGS = ['temperature', 'max_tokens', 'top_p', 'stop_sequences', 'thinking_budget', 'reasoning_effort'];

let providers = [];
let models = [];
/** Bumped by every load: a late answer for an earlier pick is dropped. */
let generation = 0;

const option = (value, text) => Object.assign(el('option', '', text), { value });
const current = () => models.find((m) => m.model === $('f-model').value);

/** What the form saves: the picked provider and model. */
export function pickedModel() {
  return { provider: $('f-provider').value, model: $('f-model').value };
}

/**
 * Whether the picked model takes `key` (a `model_settings` key) as the form stands; true when the catalogue does not
 * know it. Not while a thinking budget is filled, for what the model's provider drops then (its `excludes`).
 */
export function takesSetting(key) {
  const m = current();
  if (!m?.parameters) return true;
  return m.parameters[key] !== null && !excludedWhileThinking(m).includes(key);
}

/** The settings a filled thinking budget puts out of play on this model (anthropic, bedrock: temperature, top P). */
function excludedWhileThinking(m = current()) {
  const budget = m?.parameters?.thinking_budget;
  return budget && $('f-thinking-budget').value !== '' ? (budget.excludes ?? []) : [];
}

const SAMPLING_INPUTS = { temperature: 'f-temperature', top_p: 'f-top-p' };

/**
 * Temperature and top P are disabled, with a note saying why, while a thinking budget is filled on a model whose
 * provider drops them then: the user sees the rule as they type instead of meeting it as a refusal at Save. Their
 * values stay in the fields (clearing the budget gives them back) but are not saved (takesSetting).
 */
function showSamplingWhileThinking() {
  const out = excludedWhileThinking();
  for (const [key, id] of Object.entries(SAMPLING_INPUTS)) $(id).disabled = out.includes(key);
  const note = $('f-sampling-note');
  note.hidden = out.length === 0;
  const names = out.map((k) => (k === 'top_p' ? 'top P' : k)).join(' or ');
  note.textContent = out.length ? `${$('f-provider').value} takes no ${names} while it thinks: clear the thinking budget to set them.` : '';
}

/** Fills the picker from a config's `model` ({provider, model}); the selects hold those values at once. */
export async function showModel(model = {}) {
  const gen = ++generation;
  const provider = $('f-provider');
  const select = $('f-model');
  // Until the lists arrive the selects hold the draft's values, so a save in between keeps them.
  provider.replaceChildren(option(model.provider ?? '', model.provider ?? ''));
  select.replaceChildren(option(model.model ?? '', model.model ?? ''));
  const { data } = await console$.get('/model-providers');
  if (gen !== generation) return;
  providers = data;
  provider.replaceChildren(...data.map((p) => option(p.provider, p.usable ? p.provider : `${p.provider} (add credentials)`)));
  if (model.provider && !data.some((p) => p.provider === model.provider))
    provider.append(option(model.provider, `${model.provider} (not offered by this deployment)`));
  provider.value = model.provider ?? '';
  await loadModels(model.model, gen);
}

async function loadModels(keep, gen = ++generation) {
  const name = $('f-provider').value;
  const select = $('f-model');
  const p = providers.find((x) => x.provider === name);
  showCredentials(p);
  const list = p ? (await console$.get(`/model-providers/${encodeURIComponent(name)}/models`)).data : [];
  if (gen !== generation) return;
  models = list;
  select.replaceChildren(...list.map((m) => option(m.model, m.label && m.label !== m.model ? `${m.label} (${m.model})` : m.model)));
  // A model the catalogue does not list (removed since, or a custom name) stays as it is, marked.
  if (keep && !list.some((m) => m.model === keep)) select.append(option(keep, `${keep} (not in the catalogue)`));
  if (keep) select.value = keep;
  showSettings();
}

/** The callout under the provider: its credentials are missing, with a way to the Models screen's form. */
function showCredentials(p) {
  const box = $('f-credentials');
  box.hidden = !p || p.usable;
  if (box.hidden) return;
  $('f-credentials-text').textContent =
    `This workspace has no ${p.provider} credentials and the deployment does not host it: its models run once you add them.`;
  $('f-add-credentials').dataset.provider = p.provider;
}

const numberOrDash = (n, unit) => (n ? `${n.toLocaleString('en-US')} ${unit}` : '—');

/** The settings fields as the picked model declares them, and its facts under the model select. */
function showSettings() {
  const m = current();
  const params = m?.parameters;
  for (const key of SETTINGS) {
    const box = document.querySelector(`#editor [data-param="${key}"]`);
    if (box) box.hidden = Boolean(params) && params[key] === null;
  }
  const bound = (id, range, what) => {
    const input = $(id);
    if (range?.min !== undefined) input.min = String(range.min);
    else input.removeAttribute('min');
    if (range?.max !== undefined && range.max !== null) input.max = String(range.max);
    else input.removeAttribute('max');
    $(`${id}-range`).textContent =
      range && range.max !== null && range.max !== undefined ? `(${range.min}–${range.max.toLocaleString('en-US')}${what})` : '';
  };
  bound('f-temperature', params?.temperature ?? { min: 0, max: 2 }, '');
  bound('f-max-tokens', params?.max_tokens ?? { min: 1, max: null }, ' tokens');
  bound('f-thinking-budget', params?.thinking_budget ?? { min: 1, max: null }, ' tokens');
  const efforts = params?.reasoning_effort ?? ['minimal', 'low', 'medium', 'high'];
  const effort = $('f-reasoning-effort');
  const was = effort.value;
  effort.replaceChildren(option('', '(the model’s default)'), ...efforts.map((e) => option(e, e)));
  effort.value = efforts.includes(was) ? was : '';
  showSamplingWhileThinking();
  const info = $('f-model-info');
  if (!m) {
    info.textContent = $('f-model').value ? 'Not in the catalogue: its settings are not checked against it here.' : '';
    return;
  }
  const yes = Object.entries(m.features)
    .filter(([k, v]) => v && k !== 'temperature')
    .map(([k]) => k.replace('_', ' '));
  info.textContent = [
    yes.length ? yes.join(', ') : 'text only',
    `context ${numberOrDash(m.context_window, 'tokens')}`,
    `max output ${numberOrDash(m.max_output, 'tokens')}`,
    m.prices?.input !== undefined ? `${m.prices.input} in / ${m.prices.output} out ${m.prices.currency} per ${m.prices.per}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

// Another provider: its first catalogue model.
$('f-provider').addEventListener('change', () => void loadModels(undefined).catch((err) => say(err.message)));
$('f-model').addEventListener('change', showSettings);
$('f-thinking-budget').addEventListener('input', showSamplingWhileThinking);
// To the Models screen, on this provider's credential form (studio-models.js focuses it once shown).
$('f-add-credentials').addEventListener('click', () => {
  document.dispatchEvent(new CustomEvent('studio:add-credentials', { detail: $('f-add-credentials').dataset.provider }));
  document.querySelector('#screens button[data-screen="models"]')?.click();
});
