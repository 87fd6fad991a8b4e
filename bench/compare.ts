/**
 * `npm run bench:compare -- a.json b.json …` — the figures that judge a change, one line per result file and workload,
 * every ratio taken inside its own run: first token extra over the floor at the lowest concurrency, turns/s durable
 * over direct, CPU per turn durable minus direct (all processes) and statements / write transactions per durable turn
 * at the highest. Made for an interleaved A/B on a machine whose speed drifts (docs/decisions/0010-interleaved-ab-comparisons.md):
 * run two checkouts alternately with the same options, then compare the files.
 */
import fs from 'node:fs';
import path from 'node:path';
import { compareTable } from './compare-table.js';
import type { BenchResult } from './runner.js';

const files = process.argv.slice(2).filter((a) => a !== '--');
if (files.length === 0) {
  console.error('usage: npm run bench:compare -- <result.json> [<result.json> …]');
  process.exit(2);
}
const results = files.map((f) => ({ name: path.basename(f), result: JSON.parse(fs.readFileSync(f, 'utf8')) as BenchResult }));
for (const line of compareTable(results)) console.log(line);
