/**
 * The knowledge workload (bench/README.md "Knowledge"): what retrieval costs per turn. One dataset of generated
 * documents (demo embeddings, so the hybrid path runs), two demo agents that differ only in `knowledge.enabled`,
 * the same `/kb` query through the durable path on both at each concurrency; the cost per turn is the difference of
 * the medians. The retrieval alone (the console hit test, the same code a turn's retrieval runs) is timed beside it.
 */
import { createAgentApp } from '../core/domain/seed.js';
import { AgentSoulConfig } from '../core/domain/soul.js';
import type { Stack } from '../stack/start-stack.js';
import { durableTurn, nowMs, type TurnSample } from './client.js';
import { median } from './stats.js';

export const KNOWLEDGE_QUERY = '/slow 0 /kb What is the launch code of project Zephyr?';
const DOCUMENTS = 40;

export interface KnowledgeCell {
  concurrency: number;
  turns: number;
  errors: number;
  /** Turns refused by admission control (503 + Retry-After): shed, not errors. */
  shed?: number;
  /** Medians, ms: first token and end of a turn without and with knowledge, and a bare retrieval. */
  off: { ttftP50: number | null; endP50: number | null };
  on: { ttftP50: number | null; endP50: number | null };
  retrievalP50: number | null;
  /** on − off, end p50: what retrieval adds to a turn. */
  costPerTurnMs: number | null;
}

export async function runKnowledgeBench(
  stack: Stack,
  opts: { concurrency: number[]; turns: number },
  log: (line: string) => void,
): Promise<KnowledgeCell[]> {
  const setup = await prepare(stack);
  log(`knowledge: dataset of ${DOCUMENTS} documents (${setup.chunks} chunks), demo embeddings`);
  const cells: KnowledgeCell[] = [];
  for (const c of opts.concurrency) {
    const turns = Math.max(opts.turns, 2 * c);
    const off = await closedLoop(c, turns, (i) =>
      durableTurn({ apiUrl: stack.apiUrl, apiKey: setup.offKey, user: `kb-${i % c}` }, KNOWLEDGE_QUERY),
    );
    const on = await closedLoop(c, turns, (i) =>
      durableTurn({ apiUrl: stack.apiUrl, apiKey: setup.onKey, user: `kb-${i % c}` }, KNOWLEDGE_QUERY),
    );
    const retrieval = await closedLoop(c, turns, () => hitTest(stack, setup));
    const stats = (s: TurnSample[]) => ({
      ttftP50: median(s.filter((x) => x.ok).map((x) => x.ttftMs!)),
      endP50: median(s.filter((x) => x.ok).map((x) => x.endMs!)),
    });
    const cell: KnowledgeCell = {
      concurrency: c,
      turns,
      errors: [...off, ...on].filter((s) => !s.ok && !s.shed).length + retrieval.filter((r) => r === null).length,
      shed: [...off, ...on].filter((s) => s.shed).length,
      off: stats(off),
      on: stats(on),
      retrievalP50: median(retrieval.filter((r): r is number => r !== null)),
      costPerTurnMs: null,
    };
    if (cell.on.endP50 !== null && cell.off.endP50 !== null) cell.costPerTurnMs = cell.on.endP50 - cell.off.endP50;
    log(`knowledge c=${c}: end p50 ${fmt(cell.off.endP50)} → ${fmt(cell.on.endP50)} ms, retrieval p50 ${fmt(cell.retrievalP50)} ms`);
    cells.push(cell);
  }
  return cells;
}

export function renderKnowledgeMarkdown(cells: KnowledgeCell[]): string {
  const rows = cells.map(
    (c) =>
      `| ${c.concurrency} | ${c.turns} | ${fmt(c.off.ttftP50)} / ${fmt(c.on.ttftP50)} | ${fmt(c.off.endP50)} / ${fmt(c.on.endP50)} | ` +
      `${fmt(c.costPerTurnMs)} | ${fmt(c.retrievalP50)} | ${c.errors}${c.shed ? ` (+${c.shed} shed)` : ''} |`,
  );
  return [
    '### Knowledge: retrieval cost per turn',
    '',
    `Query \`${KNOWLEDGE_QUERY}\`, durable path, knowledge off / on (p50, ms); retrieval = the hit test alone.`,
    '',
    '| c | turns | first token off / on | end off / on | cost per turn | retrieval | errors |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

interface Setup {
  onKey: string;
  offKey: string;
  datasetId: string;
  consoleKey: string;
  chunks: number;
}

async function prepare(stack: Stack): Promise<Setup> {
  const consoleKey = stack.demo!.consoleKey;
  const api = (path: string, body: unknown) =>
    fetch(`${stack.apiUrl}/console/api${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => {
      if (!r.ok) throw new Error(`knowledge bench setup: ${path} answered ${r.status}: ${await r.text()}`);
      return (await r.json()) as { id: string; chunk_count?: number };
    });
  const ds = await api('/datasets', { name: `bench-${Date.now()}`, embedding: { provider: 'demo', model: 'demo-embedding' } });
  let chunks = 0;
  for (let i = 0; i < DOCUMENTS; i++) {
    const text =
      i === 0
        ? 'Project Zephyr is our glider programme. The launch code of project Zephyr is 7-ALPHA-42.'
        : Array.from({ length: 12 }, (_, j) => `Section ${j} of handbook ${i}: procedures for hangar ${(i * j) % 17}, crew ${j}.`).join(
            '\n\n',
          );
    chunks += (await api(`/datasets/${ds.id}/documents`, { name: `handbook-${i}.txt`, text })).chunk_count ?? 0;
  }
  const soul = (enabled: boolean) =>
    AgentSoulConfig.parse({
      model: { provider: 'demo', model: 'demo-chat' },
      knowledge: { enabled, dataset_ids: enabled ? [ds.id] : [], top_k: 4, search_tool: true },
    });
  const tenantId = stack.demo!.tenantId;
  const on = await createAgentApp(stack.db, tenantId, { name: `bench knowledge on ${ds.id}`, soul: soul(true) });
  const off = await createAgentApp(stack.db, tenantId, { name: `bench knowledge off ${ds.id}`, soul: soul(false) });
  return { onKey: on.apiKey, offKey: off.apiKey, datasetId: ds.id, consoleKey, chunks };
}

async function hitTest(stack: Stack, s: Setup): Promise<number | null> {
  const t = nowMs();
  const r = await fetch(`${stack.apiUrl}/console/api/datasets/${s.datasetId}/retrieve`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.consoleKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: 'What is the launch code of project Zephyr?', top_k: 4 }),
  });
  await r.arrayBuffer();
  return r.ok ? nowMs() - t : null;
}

/** `concurrency` clients, each starting its next task when the previous ended, `total` tasks in all. */
async function closedLoop<T>(concurrency: number, total: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) out.push(await task(next++));
    }),
  );
  return out;
}

const fmt = (v: number | null) => (v === null ? '–' : v.toFixed(1));
