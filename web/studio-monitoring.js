// The studio's monitoring screen (issue 42, Dify's "Monitoring"): the open app's conversations, active end users,
// messages, tokens, cost, latency p50/p95 and error rate per hour or day over a range (Dify's presets), from
// GET /console/api/apps/{app_id}/statistics (api/console/monitoring.ts: our own messages table, the debugger's turns
// left out). Each chart is a Chart.js line chart (lib/charts.js, loaded with the screen's first show), a canvas
// labelled with its figures for a screen reader; each card names the range's total.
import { $, console$, currentAppId, el, field, register } from './studio-common.js';

const section = el('section', 'screen');
section.id = 'monitoring';
section.setAttribute('aria-labelledby', 'monitoring-title');
section.innerHTML = `
  <h2 id="monitoring-title">Monitoring <small class="hint">(end users’ conversations of the open agent app; the debugger’s are left out)</small></h2>
  <form id="mon-filters" class="row" aria-label="Monitoring range"></form>
  <p id="mon-range-info" class="hint"></p>
  <div id="mon-charts" class="mon-charts"></div>`;

const range = document.createElement('select');
range.id = 'mon-range';
for (const [value, text] of [
  ['today', 'Today'],
  ['last7days', 'Last 7 days'],
  ['last4weeks', 'Last 4 weeks'],
  ['last3months', 'Last 3 months'],
  ['all', 'All time'],
]) {
  const o = el('option', '', text);
  o.value = value;
  range.append(o);
}
range.value = 'last7days';
const granularity = document.createElement('select');
granularity.id = 'mon-granularity';
for (const [value, text] of [
  ['', 'auto'],
  ['hour', 'by hour'],
  ['day', 'by day'],
]) {
  const o = el('option', '', text);
  o.value = value;
  granularity.append(o);
}
section.querySelector('#mon-filters').append(field('Range', range), field('Buckets', granularity));

const money = (v) => `$${Number(v).toFixed(Number(v) && Math.abs(Number(v)) < 0.01 ? 5 : 2)}`;
const seconds = (v) => `${Number(v).toFixed(2)} s`;
const percent = (v) => `${(Number(v) * 100).toFixed(1)} %`;
const integer = (v) => Number(v).toLocaleString('en');

/** The charts: one card each, its series from a bucket and its total from the range's totals. */
const CHARTS = [
  { id: 'conversations', title: 'Conversations', series: [['conversations', 'conversations']], format: integer },
  { id: 'active-users', title: 'Active users', series: [['active_users', 'users']], format: integer },
  { id: 'messages', title: 'Messages', series: [['messages', 'messages']], format: integer },
  { id: 'tokens', title: 'Tokens', series: [['tokens', 'tokens']], format: integer },
  { id: 'cost', title: 'Cost', series: [['cost', 'cost']], format: money },
  {
    id: 'latency',
    title: 'Latency',
    series: [
      ['latency_p50', 'p50'],
      ['latency_p95', 'p95'],
    ],
    format: seconds,
  },
  { id: 'error-rate', title: 'Error rate', series: [['error_rate', 'error rate']], format: percent },
];

const cards = new Map();
for (const c of CHARTS) {
  const card = el('figure', 'mon-card');
  card.dataset.chart = c.id;
  const caption = el('figcaption');
  const total = el('span', 'mon-total');
  caption.append(el('strong', '', c.title), ' ', total);
  const box = el('div', 'mon-canvas');
  const canvas = document.createElement('canvas');
  canvas.id = `mon-${c.id}`;
  canvas.setAttribute('role', 'img');
  box.append(canvas);
  card.append(caption, box);
  section.querySelector('#mon-charts').append(card);
  cards.set(c.id, { canvas, total });
}

let charts = null;
let loading = 0;
async function load() {
  const appId = currentAppId();
  if (!appId) return;
  const mine = ++loading;
  const q = new URLSearchParams({ range: range.value, tz: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC' });
  if (granularity.value) q.set('granularity', granularity.value);
  charts ??= import('./lib/charts.js');
  const [stats, { drawLines }] = await Promise.all([console$.get(`/apps/${appId}/statistics?${q}`), charts]);
  if (mine !== loading) return; // a newer range was asked for meanwhile
  const labels = stats.data.map((p) => (stats.granularity === 'hour' ? p.bucket.replace('T', ' ') : p.bucket));
  $('mon-range-info').textContent =
    `${stats.data.length} ${stats.granularity === 'hour' ? 'hours' : 'days'} from ${labels[0] ?? '—'} (${stats.tz})`;
  for (const c of CHARTS) {
    const { canvas, total } = cards.get(c.id);
    const series = c.series.map(([key, label]) => ({ label, data: stats.data.map((p) => (p[key] === null ? null : Number(p[key]))) }));
    drawLines(canvas, labels, series, c.format);
    const totals = c.series
      .map(([key, label]) => `${c.series.length > 1 ? `${label} ` : ''}${stats.totals[key] === null ? '—' : c.format(stats.totals[key])}`)
      .join(' · ');
    total.textContent = totals;
    canvas.dataset.points = String(labels.length);
    canvas.setAttribute('aria-label', `${c.title} per ${stats.granularity}, ${labels.length} points; over the range ${totals}`);
  }
}

range.addEventListener('change', () => {
  // Hourly buckets are offered up to four weeks (the api refuses more).
  if (['last3months', 'all'].includes(range.value) && granularity.value === 'hour') granularity.value = '';
  void load().catch((err) => ($('status').textContent = err.message));
});
granularity.addEventListener('change', () => void load().catch((err) => ($('status').textContent = err.message)));

register({ name: 'monitoring', title: 'Monitoring', el: section, show: load });
