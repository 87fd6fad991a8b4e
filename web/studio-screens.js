// The studio's navigation (issue 34 item 2): the agent screen (config and debugger side by side on a desktop,
// stacked on a phone: studio-screens.css) and one screen per module — logs (issue 42 problem 1: a screen of its own,
// no longer under the agent's config and debugger), datasets, tools, models, API keys, versions. The
// chosen screen is in the URL fragment (#datasets …) and on <body data-screen>, which studio-screens.css uses to show it.

import './studio-screens.css';
import { screens } from './studio-common.js';
// Registered first: its tab comes right after the agent's (Dify's order: orchestrate, then logs).
import './studio-logs.js';
import './studio-monitoring.js';
import './studio-datasets.js';
import './studio-tools.js';
import './studio-models.js';
import './studio-keys.js';
import './studio-versions.js';
import './studio-schedules.js';
import './studio-webhooks.js';
import './studio-apps.js';

const nav = document.createElement('nav');
nav.id = 'screens';
nav.setAttribute('aria-label', 'Studio screens');
const main = document.querySelector('main');
const status = document.getElementById('status');
main.insertBefore(nav, status);
const tabs = [{ name: 'agent', title: 'Agent' }, ...screens];

const after = status.nextSibling;
for (const s of screens) {
  s.el.dataset.screenOf = s.name;
  main.insertBefore(s.el, after);
}
for (const t of tabs) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = t.title;
  b.dataset.screen = t.name;
  b.addEventListener('click', () => void show(t.name));
  nav.append(b);
}

async function show(name) {
  const tab = tabs.find((t) => t.name === name) ?? tabs[0];
  if (document.body.dataset.screen !== tab.name) {
    main.scrollTo(0, 0);
    // The status line spoke of the screen left behind.
    if (document.body.dataset.screen) status.textContent = '';
  }
  document.body.dataset.screen = tab.name;
  // The agent screen (studio.js) refreshes what other screens may have changed, e.g. the datasets it offers.
  document.dispatchEvent(new CustomEvent('studio:screen', { detail: tab.name }));
  for (const b of nav.children) b.setAttribute('aria-current', b.dataset.screen === tab.name ? 'page' : 'false');
  if (location.hash.slice(1) !== tab.name && !location.hash.includes('key=')) history.replaceState(null, '', `#${tab.name}`);
  try {
    await tab.show?.();
  } catch (err) {
    status.textContent = err.message;
  }
}

// Reload the open screen once the agent screen has opened an app (its list marks the active one).
const apps = document.getElementById('apps');
let pending = 0;
new MutationObserver(() => {
  clearTimeout(pending);
  pending = setTimeout(() => {
    const open = tabs.find((t) => t.name === document.body.dataset.screen);
    if (open?.show && apps.querySelector('li.active')) void show(open.name);
  }, 50);
}).observe(apps, { subtree: true, attributes: true, attributeFilter: ['class'], childList: true });

const first = location.hash.slice(1);
void show(tabs.some((t) => t.name === first) ? first : 'agent');
