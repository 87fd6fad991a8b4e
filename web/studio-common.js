// What the studio's screens (studio-datasets.js, studio-tools.js, studio-models.js, studio-keys.js,
// studio-versions.js) share: the console API client with the tab's console key (studio.js keeps it in
// sessionStorage), the app the agent screen has open, and edits of its shared draft that the agent screen reloads.

import { createApi } from './lib/api.js';
import { el } from './turn-view.js';

export { el };
export const console$ = createApi({ base: '/console/api', key: () => sessionStorage.getItem('agent-studio-key') || '' });
export const $ = (id) => document.getElementById(id);
export const say = (text) => ($('status').textContent = text);
/** The app open in the agent screen (studio.js marks it in the agents list). */
export const currentAppId = () => document.querySelector('#apps li.active')?.dataset.app || '';

/** Reads the shared draft, applies `edit(config)`, saves it (validated by the api) and tells the agent screen. */
export async function editDraft(edit) {
  const appId = currentAppId();
  if (!appId) throw new Error('Open an agent first.');
  const d = await console$.get(`/apps/${appId}/agent/draft`);
  const config = structuredClone(d.config);
  edit(config);
  const saved = await console$.json(`/apps/${appId}/agent/draft`, { method: 'PUT', json: { config } });
  draftChanged();
  return saved;
}

/** The agent screen reloads its form when its draft picker changes (studio.js): the draft saved here shows there. */
export function draftChanged() {
  $('target')?.dispatchEvent(new Event('change'));
}

export async function readDraft() {
  const appId = currentAppId();
  return appId ? (await console$.get(`/apps/${appId}/agent/draft`)).config : null;
}

/** A labelled control: `<label>text <input></label>`. */
export function field(text, control) {
  const label = el('label', '', `${text} `);
  label.append(control);
  return label;
}
export function input(attrs = {}) {
  const i = document.createElement(attrs.tag || 'input');
  for (const [k, v] of Object.entries(attrs)) if (k !== 'tag') i.setAttribute(k, v);
  return i;
}
export function button(text, onClick, cls = '') {
  const b = el('button', cls, text);
  b.type = 'button';
  b.addEventListener('click', () => void Promise.resolve(onClick(b)).catch((err) => say(err.message)));
  return b;
}
/** `1 tool`, `2 tools`. */
export const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
export const when = (s) => (s ? new Date(s * 1000).toLocaleString() : '—');

/** The screens' registry: `register(name, {title, el, show})`; studio-screens.js builds the navigation from it. */
export const screens = [];
export function register(s) {
  screens.push(s);
}
