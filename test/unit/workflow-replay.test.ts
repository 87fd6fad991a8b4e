/**
 * Determinism across releases: histories recorded by earlier workflow code (test/fixtures/histories/<release>/,
 * made with scripts/record-histories.ts) must replay on today's `workflows/`. A change that would break
 * running turns — a reordered step, a new activity in the middle — fails here unless it is guarded with
 * `patched()`. No server needed: the replay worker feeds the recorded events to the workflow code.
 */
import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures', 'histories');
const WORKFLOWS_PATH = path.join(ROOT, 'workflows', 'index.ts');

const files = fs
  .readdirSync(FIXTURES)
  .flatMap((release) => fs.readdirSync(path.join(FIXTURES, release)).map((f) => path.join(FIXTURES, release, f)))
  .filter((f) => f.endsWith('.json'));

function load(file: string) {
  return historyFromJSON(JSON.parse(fs.readFileSync(file, 'utf8')));
}

// One bundle of today's workflows/ for every replay (each replay worker given workflowsPath ran webpack again: ~1.5 s each).
let workflowBundle: { code: string };
const quiet = () => undefined;

beforeAll(async () => {
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch {
    /* installed already in this process */
  }
  workflowBundle = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    logger: { log: quiet, info: quiet, warn: quiet, error: console.error, debug: quiet, trace: quiet },
  });
}, 120_000);

describe('agentTurn replays recorded histories', () => {
  it('has histories of more than one release to replay', () => {
    expect(new Set(files.map((f) => path.basename(path.dirname(f)))).size).toBeGreaterThanOrEqual(2);
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  it.each(files.map((f) => [path.relative(FIXTURES, f), f]))('%s', { timeout: 60_000 }, async (_name, file) => {
    await Worker.runReplayHistory({ workflowBundle, replayName: path.basename(file) }, load(file));
  });

  it('detects a history the code cannot have produced (the check can fail)', { timeout: 60_000 }, async () => {
    const raw = JSON.parse(
      fs.readFileSync(
        files.find((f) => f.endsWith('succeeded.json'))!,
        'utf8',
      ),
    ) as {
      events: { eventType: string; activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[];
    };
    const scheduled = raw.events.find((e) => e.activityTaskScheduledEventAttributes)!;
    scheduled.activityTaskScheduledEventAttributes!.activityType.name = 'someOtherActivity';
    await expect(Worker.runReplayHistory({ workflowBundle, replayName: 'tampered' }, historyFromJSON(raw))).rejects.toThrow(
      /nondetermin|DeterminismViolation/i,
    );
  });
});
