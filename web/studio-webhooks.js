// The studio's webhooks screen (issue 35 item 5): the open app's webhook endpoints over api/console/webhooks.ts — add
// one (a URL and the events it wants; its signing secret is shown this once), turn it off and on, delete it — and a
// webhook's delivery log (event, status, attempts, response code, last error) with redeliver (the same event id, so a
// receiver can deduplicate). Payload and signature: docs/PROTOCOL.md "Scheduled turns and webhooks".

import { button, console$, count, currentAppId, el, field, input, register, say, when } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'webhooks-screen';
section.setAttribute('aria-labelledby', 'webhooks-title');
section.innerHTML = `
  <h2 id="webhooks-title">Webhooks <small class="hint">(signed POSTs of the open agent’s turn and schedule outcomes)</small></h2>
  <form id="wh-create" class="card" novalidate><h3>New endpoint</h3></form>
  <p id="wh-secret" class="secret-once" hidden></p>
  <div class="table-scroll" tabindex="0" role="region" aria-label="Webhook endpoints"><table id="wh-table"><thead><tr>
    <th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Actions</th>
  </tr></thead><tbody></tbody></table></div>
  <div id="wh-log" hidden>
    <h3 id="wh-log-title">Deliveries</h3>
    <div class="row"><button id="wh-log-refresh" type="button">Refresh</button> <span id="wh-log-pager" class="hint"></span></div>
    <div class="table-scroll" tabindex="0" role="region" aria-label="Deliveries"><table id="wh-deliveries"><thead><tr>
      <th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Response</th>
      <th scope="col">Created</th><th scope="col">Delivered</th><th scope="col">Redeliver</th>
    </tr></thead><tbody></tbody></table></div>
  </div>`;

const url = input({
  id: 'wh-url',
  type: 'url',
  placeholder: 'https://example.com/hooks/agent',
  maxlength: '2048',
  'aria-describedby': 'wh-url-error',
});
// Why the api refused the URL (400 `invalid_webhook_url`: userinfo, a private or unresolvable host; `invalid_param`),
// next to the field it is about.
const urlError = el('div', 'field-error');
urlError.id = 'wh-url-error';
urlError.hidden = true;
function showUrlError(message) {
  urlError.textContent = message;
  urlError.hidden = !message;
  if (message) url.setAttribute('aria-invalid', 'true');
  else url.removeAttribute('aria-invalid');
}
url.addEventListener('input', () => showUrlError(''));
const events = el('fieldset', 'events');
events.append(el('legend', '', 'Events'));
// The events from the api (GET /webhook-events: api/console/webhooks.ts WEBHOOK_EVENTS, what the create accepts), read
// once, when the screen first opens; the checkboxes are made from it, never from a list kept in this page.
let eventsRead = null;
function loadEvents() {
  eventsRead ??= console$.get('/webhook-events').then(
    ({ data }) => {
      for (const e of data) {
        const label = el('label', 'check');
        const box = input({ type: 'checkbox', value: e });
        box.checked = true;
        label.append(box, ` ${e}`);
        events.append(label);
      }
    },
    (err) => {
      eventsRead = null; // the next show asks again
      throw err;
    },
  );
  return eventsRead;
}
const add = el('button', 'primary', 'Add endpoint');
add.type = 'submit';
section.querySelector('#wh-create').append(field('URL', url), urlError, events, add);
const state = { open: null };
const badge = (status) => el('span', `badge ${status === 'succeeded' ? 'completed' : status === 'pending' ? 'waiting' : 'error'}`, status);

async function load() {
  const appId = currentAppId();
  if (!appId) return;
  // Every page of the list (newest first; an app holds at most WEBHOOKS_PER_APP of them).
  const data = [];
  for (let page = 1; ; page++) {
    const p = await console$.get(`/apps/${appId}/webhooks?page=${page}&limit=100`);
    data.push(...p.data);
    if (!p.has_more) break;
  }
  const tbody = section.querySelector('#wh-table tbody');
  tbody.textContent = '';
  for (const w of data) {
    const tr = el('tr', w.id === state.open?.id ? 'active' : '');
    tr.dataset.webhook = w.id;
    const u = el('td', 'clip');
    u.append(el('code', '', w.url));
    const actions = el('td');
    actions.append(
      button('Deliveries', () => openLog(w)),
      ' ',
      button(w.enabled ? 'Turn off' : 'Turn on', async () => {
        await console$.json(`/apps/${appId}/webhooks/${w.id}`, { method: 'PATCH', json: { enabled: !w.enabled } });
        say(`${w.url} ${w.enabled ? 'gets no more events' : 'gets events again'}.`);
        await load();
      }),
      ' ',
      button(
        'Delete',
        async (b) => {
          if (!confirm(`Delete the webhook ${w.url} and its delivery log?`)) return;
          b.disabled = true;
          await console$.del(`/apps/${appId}/webhooks/${w.id}`);
          if (state.open?.id === w.id) closeLog();
          say(`Deleted the webhook ${w.url}.`);
          await load();
        },
        'danger',
      ),
    );
    tr.append(u, el('td', 'clip', w.events.join(', ')), el('td', '', w.enabled ? 'on' : 'off'), actions);
    tbody.append(tr);
  }
  if (state.open && !data.some((w) => w.id === state.open.id)) closeLog();
  if (state.open) await loadLog();
}

function closeLog() {
  state.open = null;
  section.querySelector('#wh-log').hidden = true;
}

async function openLog(w) {
  state.open = w;
  section.querySelector('#wh-log-title').textContent = `Deliveries to ${w.url}`;
  section.querySelector('#wh-log').hidden = false;
  for (const tr of section.querySelectorAll('#wh-table tbody tr')) tr.classList.toggle('active', tr.dataset.webhook === w.id);
  await loadLog();
}

async function loadLog() {
  const appId = currentAppId();
  const w = state.open;
  const page = await console$.get(`/apps/${appId}/webhooks/${w.id}/deliveries?limit=50`);
  const tbody = section.querySelector('#wh-deliveries tbody');
  tbody.textContent = '';
  for (const d of page.data) {
    const tr = el('tr');
    tr.dataset.delivery = d.id;
    tr.dataset.status = d.status;
    const status = el('td');
    status.append(badge(d.status));
    if (d.redelivery_of) status.append(el('div', 'hint', 'redelivery'));
    if (d.last_error) status.append(el('div', 'field-error', d.last_error));
    const redeliver = el('td');
    redeliver.append(
      button('Redeliver', async () => {
        await console$.post(`/apps/${appId}/webhooks/${w.id}/deliveries/${d.id}/redeliver`, {});
        say(`Redelivering ${d.event}.`);
        await loadLog();
      }),
    );
    tr.append(
      el('td', '', d.event),
      status,
      el('td', 'attempts', String(d.attempts)),
      el('td', '', d.response_code === null ? '—' : String(d.response_code)),
      el('td', '', when(d.created_at)),
      el('td', '', when(d.delivered_at)),
      redeliver,
    );
    tbody.append(tr);
  }
  section.querySelector('#wh-log-pager').textContent = count(page.total, 'delivery', 'deliveries');
}

section.querySelector('#wh-log-refresh').addEventListener('click', () => void loadLog().catch((err) => say(err.message)));

section.querySelector('#wh-create').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const appId = currentAppId();
  const picked = [...events.querySelectorAll('input:checked')].map((b) => b.value);
  if (!picked.length) return say('Pick at least one event.');
  showUrlError('');
  add.disabled = true;
  void console$
    .post(`/apps/${appId}/webhooks`, { url: url.value.trim(), events: picked })
    .then(async (w) => {
      const p = section.querySelector('#wh-secret');
      p.hidden = false;
      p.textContent = `Signing secret of ${w.url} — copy it now, it is not shown again: `;
      p.append(el('code', '', w.secret));
      url.value = '';
      say(`Added the webhook ${w.url}.`);
      await load();
    })
    .catch((err) => {
      if (err.code === 'invalid_webhook_url' || (err.code === 'invalid_param' && /^url\b/.test(err.message))) {
        showUrlError(err.message);
        url.focus();
      }
      say(err.message);
    })
    .finally(() => (add.disabled = false));
});

register({
  name: 'webhooks',
  title: 'Webhooks',
  el: section,
  show: () => ((section.querySelector('#wh-secret').hidden = true), Promise.all([loadEvents(), load()])),
});
