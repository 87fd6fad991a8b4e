// The studio's versions screen (issue 34 item 2): every published version of the open agent with the two ways back
// to it — publish it again (a new version with its config: service turns run on it) or load it into the shared
// draft to edit — through POST …/agent/versions/{id}/restore (validated again: a dataset deleted since is refused).

import { button, console$, count, currentAppId, draftChanged, el, register, say, when } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'versions-screen';
section.setAttribute('aria-labelledby', 'versions-title');
section.innerHTML = `
  <h2 id="versions-title">Versions</h2>
  <div class="table-scroll" tabindex="0" role="region" aria-label="Published versions"><table id="ver-table"><thead><tr>
    <th scope="col">Version</th><th scope="col">Published</th><th scope="col">Config</th><th scope="col">Restore</th>
  </tr></thead><tbody></tbody></table></div>
  <div class="row"><span id="ver-pager"></span></div>`;
let page = 1;

async function restore(v, to) {
  const appId = currentAppId();
  const r = await console$.post(`/apps/${appId}/agent/versions/${v.id}/restore`, { to });
  draftChanged();
  if (to === 'publish') document.dispatchEvent(new CustomEvent('studio:versions-changed'));
  say(to === 'publish' ? `Published v${v.version} again as v${r.version.version}.` : `Loaded v${v.version} into the shared draft.`);
  await load();
}

async function load() {
  const appId = currentAppId();
  if (!appId) return;
  const list = await console$.get(`/apps/${appId}/agent/versions?page=${page}&limit=10`);
  const full = await Promise.all(list.data.map((v) => console$.get(`/apps/${appId}/agent/versions/${v.id}`)));
  const tbody = section.querySelector('#ver-table tbody');
  tbody.textContent = '';
  for (const v of full) {
    const tr = el('tr', v.active ? 'active' : '');
    tr.dataset.version = String(v.version);
    const actions = el('td');
    actions.append(button('Load into draft', () => restore(v, 'draft')));
    if (!v.active)
      actions.append(
        ' ',
        button('Publish again', () => restore(v, 'publish'), 'primary'),
      );
    const c = v.config ?? {};
    const prompt = String(c.prompt?.system_prompt ?? '');
    const tools = [...(c.tools?.core ?? []), ...(c.tools?.plugin ?? []).map((t) => `${t.provider}__${t.name}`)];
    const summary = el('td', 'clip');
    summary.append(
      el('div', '', prompt.length > 90 ? `${prompt.slice(0, 90)}…` : prompt),
      el(
        'div',
        'hint',
        `${c.model?.provider ?? '?'} / ${c.model?.model ?? '?'} · ${count(tools.length, 'tool')} · knowledge ${
          c.knowledge?.enabled ? `on (${count((c.knowledge.dataset_ids ?? []).length, 'dataset')})` : 'off'
        }`,
      ),
    );
    tr.append(el('td', '', `v${v.version}${v.active ? ' (active)' : ''}`), el('td', '', when(v.created_at)), summary, actions);
    tbody.append(tr);
  }
  const pager = section.querySelector('#ver-pager');
  pager.textContent = '';
  const prev = button('Previous', () => ((page -= 1), load()));
  prev.disabled = list.page <= 1;
  const next = button('Next', () => ((page += 1), load()));
  next.disabled = !list.has_more;
  pager.append(prev, el('span', 'hint', ` page ${list.page} (${count(list.total, 'version')}) `), next);
}

register({ name: 'versions', title: 'Versions', el: section, show: () => ((page = 1), load()) });
