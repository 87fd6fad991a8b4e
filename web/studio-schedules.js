// The studio's schedules screen (issue 35 item 5): the open app's scheduled turns over the console routes of
// api/console/schedules.ts — create one (a cron expression or an interval, in a time zone, with the query and inputs
// each run sends as its user, a new conversation per run or one for all), list them with their next run (from
// Temporal, GET …/schedules/{id}) and last run, pause/resume, run now and delete. Each run is an ordinary turn: the
// logs list it under the schedule's user.

import { button, console$, count, currentAppId, el, field, input, register, say, when } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'schedules-screen';
section.setAttribute('aria-labelledby', 'schedules-title');
section.innerHTML = `
  <h2 id="schedules-title">Schedules <small class="hint">(turns the open agent runs on its own, on Temporal Schedules)</small></h2>
  <form id="sc-create" class="card" novalidate><h3>New schedule</h3></form>
  <div class="table-scroll" tabindex="0" role="region" aria-label="Schedules"><table id="sc-table"><thead><tr>
    <th scope="col">Name</th><th scope="col">When</th><th scope="col">Next run</th><th scope="col">Last run</th>
    <th scope="col">Sends</th><th scope="col">Actions</th>
  </tr></thead><tbody></tbody></table></div>
  <div class="row"><span id="sc-pager" class="hint"></span></div>`;

const localZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const c = {
  name: input({ id: 'sc-name', maxlength: '100', placeholder: 'Morning digest' }),
  kind: input({ tag: 'select', id: 'sc-kind' }),
  cron: input({ id: 'sc-cron', placeholder: '0 9 * * 1-5', value: '0 9 * * 1-5', 'aria-describedby': 'sc-cron-error' }),
  every: input({ id: 'sc-every', type: 'number', min: '1', step: '1', value: '3600' }),
  zone: input({ id: 'sc-zone', value: localZone, maxlength: '64' }),
  query: input({ tag: 'textarea', id: 'sc-query', rows: '2', placeholder: 'Summarise what changed since yesterday.' }),
  inputs: input({ tag: 'textarea', id: 'sc-inputs', rows: '2' }),
  user: input({ id: 'sc-user', value: 'scheduler', maxlength: '255' }),
  mode: input({ tag: 'select', id: 'sc-mode' }),
  paused: input({ id: 'sc-paused', type: 'checkbox' }),
};
c.inputs.value = '{}';
for (const [v, t] of [
  ['cron', 'a cron expression'],
  ['interval', 'an interval'],
])
  c.kind.append(Object.assign(el('option', '', t), { value: v }));
for (const [v, t] of [
  ['new', 'a new conversation each run'],
  ['single', 'one conversation for every run'],
])
  c.mode.append(Object.assign(el('option', '', t), { value: v }));
const cronLabel = field('Cron (minute hour day month weekday)', c.cron);
// Why the api refused the cron (400 invalid_schedule: which field, which value, what a cron looks like), under it.
const cronError = el('div', 'field-error');
cronError.id = 'sc-cron-error';
cronError.hidden = true;
function showCronError(message) {
  cronError.textContent = message;
  cronError.hidden = !message;
  if (message) c.cron.setAttribute('aria-invalid', 'true');
  else c.cron.removeAttribute('aria-invalid');
}
c.cron.addEventListener('input', () => showCronError(''));
const everyLabel = field('Every (seconds)', c.every);
const submit = el('button', 'primary', 'Create schedule');
submit.type = 'submit';
const when1 = el('div', 'row');
when1.append(field('Name', c.name), field('Runs on', c.kind), cronLabel, everyLabel, field('Time zone', c.zone));
const cronErrorRow = el('div', 'row');
cronErrorRow.append(cronError);
const who = el('div', 'row');
who.append(field('As the user', c.user), field('Conversation', c.mode));
const pausedLabel = el('label', 'check');
pausedLabel.append(c.paused, ' created paused');
section
  .querySelector('#sc-create')
  .append(
    when1,
    cronErrorRow,
    field('Query (what each run sends)', c.query),
    field('Inputs (JSON object)', c.inputs),
    who,
    pausedLabel,
    submit,
  );
const showKind = () => {
  cronLabel.hidden = c.kind.value !== 'cron';
  if (cronLabel.hidden) showCronError('');
  everyLabel.hidden = c.kind.value !== 'interval';
};
c.kind.addEventListener('change', showKind);
showKind();

const every = (s) =>
  `every ${s % 86400 === 0 ? count(s / 86400, 'day') : s % 3600 === 0 ? count(s / 3600, 'hour') : s % 60 === 0 ? count(s / 60, 'minute') : count(s, 'second')}`;

async function load() {
  const appId = currentAppId();
  if (!appId) return;
  // One request: the list carries each schedule's next runs from Temporal.
  const page = await console$.get(`/apps/${appId}/schedules?limit=100`);
  const tbody = section.querySelector('#sc-table tbody');
  tbody.textContent = '';
  for (const s of page.data) {
    const tr = el('tr', s.paused ? 'paused' : '');
    tr.dataset.schedule = s.id;
    tr.dataset.name = s.name;
    const next = s.paused ? 'paused' : s.next_run_times?.length ? when(s.next_run_times[0]) : '—';
    const last = el('td', 'last-run');
    if (s.last_run) {
      last.append(
        el(
          'span',
          `badge ${s.last_run.status === 'succeeded' ? 'completed' : s.last_run.status === 'failed' ? 'error' : 'waiting'}`,
          s.last_run.status ?? '?',
        ),
      );
      last.append(` ${when(s.last_run.at)}`);
      if (s.last_run.error) last.append(el('div', 'field-error', s.last_run.error));
    } else last.textContent = 'not yet';
    const sends = el('td', 'clip');
    sends.append(
      el('div', '', s.query),
      el('div', 'hint', `as ${s.user} · ${s.conversation_mode === 'single' ? 'one conversation' : 'new conversation each run'}`),
    );
    const actions = el('td');
    actions.append(
      button(s.paused ? 'Resume' : 'Pause', async (b) => {
        b.disabled = true;
        await console$.post(`/apps/${appId}/schedules/${s.id}/${s.paused ? 'unpause' : 'pause'}`, {});
        say(`${s.paused ? 'Resumed' : 'Paused'} ${s.name}.`);
        await load();
      }),
      ' ',
      button('Run now', async () => {
        await console$.post(`/apps/${appId}/schedules/${s.id}/trigger`, {});
        say(`${s.name} runs now.`);
        // Its last run shows once the turn ends.
        setTimeout(() => void load().catch(() => undefined), 1500);
      }),
      ' ',
      button(
        'Delete',
        async (b) => {
          if (!confirm(`Delete the schedule ${s.name}? A run in progress finishes.`)) return;
          b.disabled = true;
          await console$.del(`/apps/${appId}/schedules/${s.id}`);
          say(`Deleted ${s.name}.`);
          await load();
        },
        'danger',
      ),
    );
    const whenCell = el('td', '', `${s.cron ? `cron ${s.cron}` : every(s.interval_seconds)} · ${s.time_zone}`);
    tr.append(el('td', '', s.name), whenCell, el('td', `next-run${s.paused ? ' status-paused' : ''}`, next), last, sends, actions);
    tbody.append(tr);
  }
  section.querySelector('#sc-pager').textContent = count(page.total, 'schedule');
}

section.querySelector('#sc-create').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const appId = currentAppId();
  let inputs;
  try {
    inputs = JSON.parse(c.inputs.value || '{}');
  } catch {
    return say('Inputs must be a JSON object, e.g. {"topic": "sales"}.');
  }
  const body = {
    name: c.name.value.trim(),
    ...(c.kind.value === 'cron' ? { cron: c.cron.value.trim() } : { interval_seconds: Number(c.every.value) }),
    time_zone: c.zone.value.trim() || 'UTC',
    query: c.query.value,
    inputs,
    user: c.user.value.trim(),
    conversation_mode: c.mode.value,
    paused: c.paused.checked,
  };
  submit.disabled = true;
  showCronError('');
  void console$
    .post(`/apps/${appId}/schedules`, body)
    .then(async (s) => {
      say(`Created the schedule ${s.name}.`);
      c.name.value = '';
      c.query.value = '';
      await load();
    })
    .catch((err) => {
      if (err.code === 'invalid_schedule' && /^cron\b/.test(err.message)) {
        showCronError(err.message);
        say('Not created: fix the cron.');
      } else say(err.message);
    })
    .finally(() => (submit.disabled = false));
});

register({ name: 'schedules', title: 'Schedules', el: section, show: load });
