/** A small reader of the Prometheus text format, for tests: samples by name and labels. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line.trim());
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include `match`. */
export function sum(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

/** Metric family names of an exposition (from `# TYPE` lines, and sample names without histogram/summary suffixes). */
export function metricNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) /.exec(line);
    if (t) names.add(t[1]!);
  }
  for (const s of parseProm(text)) {
    names.add(s.name);
    names.add(s.name.replace(/_(bucket|sum|count|total)$/, ''));
  }
  return names;
}

export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  if (res.status !== 200) throw new Error(`${url}/metrics answered ${res.status}`);
  return res.text();
}
