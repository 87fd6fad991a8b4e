// The monitoring screen's charts (issue 42) with Chart.js (npm, pinned in package.json; bundled by scripts/build-web.ts
// into a chunk of its own that studio-monitoring.js imports only when the screen is first shown: the studio's first
// load does not carry it, and nothing comes from a CDN). Canvas drawing only, so the strict CSP holds: no inline
// script or stylesheet, only the canvas's own sizing through the CSSOM. Only the parts a line chart needs are
// registered (Chart.js is tree-shakable).
import { CategoryScale, Chart, Filler, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip } from 'chart.js';

Chart.register(CategoryScale, Filler, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip);

const COLOURS = ['#1d4ed8', '#c2410c', '#15803d'];

/**
 * Draws (or redraws) a line chart on `canvas`: `labels` along the x axis, one line per `series` entry
 * ({label, data}); `format` renders a y value for the axis and the tooltip.
 */
export function drawLines(canvas, labels, series, format = (v) => String(v)) {
  const datasets = series.map((s, i) => ({
    label: s.label,
    data: s.data,
    borderColor: COLOURS[i % COLOURS.length],
    backgroundColor: `${COLOURS[i % COLOURS.length]}22`,
    fill: series.length === 1,
    tension: 0.25,
    pointRadius: labels.length > 40 ? 0 : 2,
    spanGaps: true,
  }));
  const existing = Chart.getChart(canvas);
  if (existing) {
    existing.data.labels = labels;
    existing.data.datasets = datasets;
    existing.update();
    return existing;
  }
  return new Chart(canvas, {
    type: 'line',
    data: { labels, datasets },
    options: {
      // Drawn at once: a screen of seven charts should not animate each, and a test reads the finished drawing.
      animation: false,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      plugins: {
        legend: { display: series.length > 1 },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.parsed.y === null ? '—' : format(c.parsed.y)}` } },
      },
      scales: {
        x: { ticks: { maxRotation: 0, autoSkip: true, maxTicksLimit: 8 } },
        y: { beginAtZero: true, ticks: { callback: (v) => format(v) } },
      },
    },
  });
}
