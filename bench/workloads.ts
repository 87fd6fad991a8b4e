/**
 * The benchmark workloads: one query each, sent unchanged through both paths. The demo model's
 * `/slow <ms>` trigger fixes the per-token delay per request, so every workload runs on one stack.
 */
export interface Workload {
  name: string;
  /** The chat query (demo triggers, core/domain/llm/DEMO_MODEL.md). */
  query: string;
  description: string;
  /** Run at one load level only (bench/runner.ts workloadLevels): the long workload, whose turns take 10 s. */
  onlyLoadLevel?: boolean;
}

export const WORKLOADS: readonly Workload[] = [
  { name: 'plain', query: '/slow 5 /long 200', description: 'plain answer, 200 tokens at 5 ms per token (~1 s of model time)' },
  {
    name: 'long',
    query: '/slow 5 /long 2000',
    description: "plain answer, 2,000 tokens at 5 ms per token (~10 s of model time): with plain, a turn's fixed CPU and its CPU per token",
    onlyLoadLevel: true,
  },
  {
    name: 'tool',
    query: '/calc 6*7',
    description: 'one calculator tool call, then a one-sentence answer (two model calls, stack default delay per token)',
  },
  { name: 'zero', query: '/slow 0 /long 200', description: 'plain answer, 200 tokens with no model delay: pure overhead' },
];

export function workloadByName(name: string): Workload {
  const w = WORKLOADS.find((x) => x.name === name);
  if (!w) throw new Error(`unknown workload "${name}"; known: ${WORKLOADS.map((x) => x.name).join(', ')}`);
  return w;
}
