// The studio's API keys screen (issue 34 item 2): the open app's keys by prefix, a new key shown once, and revoke
// (the key's next /v1 request is a 401, its open streams end; with the box ticked its running turns are stopped too,
// issue 47) — docs/operations.md "Secrets rotation".

import { button, console$, currentAppId, el, field, input, register, say, when } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'keys-screen';
section.setAttribute('aria-labelledby', 'keys-title');
section.innerHTML = `
  <h2 id="keys-title">API keys <small class="hint">(of the open agent app, for /v1)</small></h2>
  <form id="key-create" class="row"></form>
  <p id="key-new" class="secret-once" hidden></p>
  <div class="table-scroll" tabindex="0" role="region" aria-label="API keys"><table id="key-table"><thead><tr>
    <th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">State</th>
  </tr></thead><tbody></tbody></table></div>
  <p class="hint"><label><input type="checkbox" id="key-stop-turns"> Revoke also stops the turns the key started that are
  still running, queued or waiting for a human</label> (otherwise they finish and are stored; only the key's open streams end).</p>`;

const name = input({ id: 'key-name', placeholder: 'production', maxlength: '100' });
const create = el('button', 'primary', 'Create key');
create.type = 'submit';
section.querySelector('#key-create').append(field('Key name', name), create);

async function load() {
  const appId = currentAppId();
  if (!appId) return;
  const page = await console$.get(`/apps/${appId}/api-keys?limit=100`);
  const tbody = section.querySelector('#key-table tbody');
  tbody.textContent = '';
  for (const k of page.data) {
    const tr = el('tr', k.revoked_at ? 'revoked' : '');
    tr.dataset.key = k.id;
    const state = el('td');
    if (k.revoked_at) state.append(el('span', 'badge failed', `revoked ${when(k.revoked_at)}`));
    else
      state.append(
        button(
          `Revoke`,
          async (b) => {
            const stop = section.querySelector('#key-stop-turns').checked;
            const also = stop ? ' The turns it started that are still running are stopped.' : '';
            if (!confirm(`Revoke the key ${k.name} (${k.prefix}…)? Clients using it get 401 and its open streams end.${also}`)) return;
            b.disabled = true;
            // ?stop_turns=true answers which turns it stopped (docs/security.md "Revoking an app key").
            const r = await console$.del(`/apps/${appId}/api-keys/${k.id}${stop ? '?stop_turns=true' : ''}`);
            const n = r?.stopped_turns?.length ?? 0;
            say(`Revoked ${k.name} (${k.prefix}…)${stop ? `; stopped ${n} turn${n === 1 ? '' : 's'}` : ''}.`);
            await load();
          },
          'danger',
        ),
      );
    const prefix = el('td');
    prefix.append(el('code', '', `${k.prefix}…`));
    tr.append(el('td', '', k.name), prefix, el('td', '', when(k.created_at)));
    tr.append(el('td', '', when(k.last_used_at)), state);
    tbody.append(tr);
  }
}

section.querySelector('#key-create').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const appId = currentAppId();
  void console$
    .post(`/apps/${appId}/api-keys`, { name: name.value.trim() || 'default' })
    .then(async (k) => {
      const p = section.querySelector('#key-new');
      p.hidden = false;
      p.textContent = 'Copy it now, it is not shown again: ';
      p.append(el('code', '', k.key), ' ');
      // The chat page with this key (in the fragment: never sent to a server), as `npm start` prints it for the demo app.
      const chat = el('a', 'open-chat', 'Open the chat page with this key');
      chat.href = `../chat/#key=${encodeURIComponent(k.key)}`;
      chat.target = '_blank';
      chat.rel = 'noopener noreferrer';
      p.append(chat);
      name.value = '';
      await load();
    })
    .catch((err) => say(err.message));
});

register({ name: 'keys', title: 'API keys', el: section, show: () => ((section.querySelector('#key-new').hidden = true), load()) });
