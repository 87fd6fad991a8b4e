/**
 * The turn sweeper takes its configured timings (TURN_SWEEP_*, core/platform/config.ts): a batch of one ends one turn a pass,
 * and a started sweeper passes at the configured interval (not every 5 s); it deletes the inspector's model inputs past
 * MODEL_INPUT_RETENTION_DAYS, at most once an hour.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { createDb, type Db } from '../../core/platform/db.js';
import { createLogger } from '../../core/platform/logger.js';
import { sweeperTimings, TurnSweeper } from '../../worker/sweeper.js';
import { freshDatabase } from '../support/db.js';
import { preparedTurn } from './run-agent-harness.js';

let db: Db;
const logger = createLogger('turn-sweeper-config', 'silent');
/** No workflow exists: every pending message is one Temporal never started. */
const temporal = {
  workflow: {
    getHandle: (id: string) => ({
      describe: async () => {
        throw new WorkflowNotFoundError('not found', id, undefined);
      },
    }),
  },
} as unknown as Client;

beforeAll(async () => {
  db = createDb(await freshDatabase('turn_sweeper_config'));
});
afterAll(async () => {
  await db?.$disconnect();
});

const aged = async (seconds: number): Promise<string> => {
  const { messageId } = await preparedTurn(db);
  await db.$executeRaw`update messages set updated_at = now() - make_interval(secs => ${seconds}::float8) where id = ${messageId}::uuid`;
  return messageId;
};
const status = async (id: string) => (await db.message.findUniqueOrThrow({ where: { id } })).status;

describe('turn sweeper settings', () => {
  it('judges rows older than TURN_SWEEP_MIN_AGE_MS, TURN_SWEEP_BATCH a pass, every TURN_SWEEP_INTERVAL_MS', async () => {
    const config = loadConfig({}, { TURN_SWEEP_INTERVAL_MS: 100, TURN_SWEEP_MIN_AGE_MS: 30_000, TURN_SWEEP_BATCH: 1 });
    const sweeper = new TurnSweeper({ db, temporal: () => temporal, logger, ...sweeperTimings(config) });
    const young = await aged(25); // past the default 20 s, inside the configured 30 s
    const a = await aged(40);
    const b = await aged(35);
    expect((await sweeper.sweep()).failed).toEqual([a]);
    sweeper.start();
    try {
      const started = Date.now();
      while ((await status(b)) !== 'failed' && Date.now() - started < 3_000) await new Promise((r) => setTimeout(r, 50));
      expect(await status(b)).toBe('failed');
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      await sweeper.stop();
    }
    expect(await status(young)).toBe('pending');
  });

  it('deletes model inputs older than MODEL_INPUT_RETENTION_DAYS and keeps younger ones, at most once an hour', async () => {
    expect(() => loadConfig({}, { MODEL_INPUT_RETENTION_DAYS: 0 })).toThrow(/MODEL_INPUT_RETENTION_DAYS/);
    const config = loadConfig({}, { MODEL_INPUT_RETENTION_DAYS: 7 });
    const { messageId } = await preparedTurn(db);
    const { tenant_id } = await db.message.findUniqueOrThrow({ where: { id: messageId } });
    const daysAgo = (d: number) => new Date(Date.now() - d * 86_400_000);
    await db.messageModelInput.createMany({
      data: [
        { message_id: messageId, call_index: 0, tenant_id, parts: [], created_at: daysAgo(8) },
        { message_id: messageId, call_index: 1, tenant_id, parts: [], created_at: daysAgo(6) },
      ],
    });
    const sweeper = new TurnSweeper({ db, temporal: () => null, logger, ...sweeperTimings(config) });
    expect((await sweeper.sweep()).modelInputsPruned).toBe(1);
    const left = async () => (await db.messageModelInput.findMany({ where: { message_id: messageId } })).map((r) => r.call_index);
    expect(await left()).toEqual([1]);
    // The next pass within the hour does not prune again, even with a row past retention by then.
    await db.messageModelInput.update({
      where: { message_id_call_index: { message_id: messageId, call_index: 1 } },
      data: { created_at: daysAgo(9) },
    });
    expect((await sweeper.sweep()).modelInputsPruned).toBe(0);
    expect(await left()).toEqual([1]);
  });
});
