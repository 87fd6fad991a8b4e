/**
 * Prints the slowest test files of the last `npm test` (.cache/test-timings.json, written by
 * test/support/timing-reporter.ts): `.ci/run` ends with it so the suite's growth shows in every CI log.
 * `npx tsx scripts/test-timings.ts [N]` prints the slowest N (20).
 */
import fs from 'node:fs';
import { formatReport, TIMINGS_FILE, type TimingReport } from '../test/support/timing-reporter.js';

const top = Number(process.argv[2] ?? 20);
if (!fs.existsSync(TIMINGS_FILE)) {
  console.log(`no test timings yet (${TIMINGS_FILE} is written by npm test)`);
} else {
  const report = JSON.parse(fs.readFileSync(TIMINGS_FILE, 'utf8')) as TimingReport;
  console.log(`npm test of ${report.finishedAt}`);
  console.log(formatReport(report, top));
}
