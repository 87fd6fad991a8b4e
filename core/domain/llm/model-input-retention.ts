/**
 * Retention of the inspector's model inputs (message_model_inputs, issue 42): a row older than
 * MODEL_INPUT_RETENTION_DAYS (core/platform/config.ts) is deleted. Prompts hold whole conversations and tool output,
 * so they are not kept for ever beside the answers they produced. The turn sweeper (worker/sweeper.ts) runs it at most
 * once per MODEL_INPUT_PRUNE_INTERVAL_MS per worker, in batches so one pass never holds many row locks.
 */
import type { Db } from '../../platform/db.js';

/** How often a worker prunes. */
export const MODEL_INPUT_PRUNE_INTERVAL_MS = 3_600_000;
const PRUNE_BATCH = 1000;

/** Deletes model inputs recorded more than `days` ago; returns how many. */
export async function pruneModelInputs(db: Db, days: number): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await db.$executeRaw`
      delete from message_model_inputs where (message_id, call_index) in (
        select message_id, call_index from message_model_inputs
         where created_at < now() - make_interval(days => ${days}::int)
         limit ${PRUNE_BATCH} for update skip locked)`;
    total += n;
    if (n < PRUNE_BATCH) return total;
  }
}
