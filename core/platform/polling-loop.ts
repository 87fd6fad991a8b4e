/**
 * The background loop of a table-backed dispatcher (the Temporal outbox, webhook deliveries): a subclass's
 * `drainOnce` claims and handles a batch and returns how many rows it claimed (null: it did not reach the table this
 * time); a full batch drains again at once, anything less sleeps `pollMs` (at least 2 s while the database is
 * unreachable). stop() wakes the sleep and waits for the pass in flight; the rows' own leases cover a process that
 * dies mid-pass.
 */
import type { Logger } from './logger.js';

export interface PollingLoopOptions {
  /** Log prefix ("outbox", "webhook dispatcher"). */
  name: string;
  logger: Logger;
  pollMs: number;
  batch: number;
}

export abstract class PollingLoop {
  private running: Promise<void> | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;
  private databaseDown = false;

  constructor(private readonly loop: PollingLoopOptions) {}

  /** One pass: claims and handles a batch; the number of rows claimed, or null when it did not reach the table. */
  abstract drainOnce(): Promise<number | null>;

  /** After a pass that reached the table (e.g. pruning old rows). */
  protected async afterDrain(): Promise<void> {}

  /** Starts the loop (idempotent). */
  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = this.run();
  }

  /** Stops the loop; the pass in flight finishes (its rows' leases cover a crash anyway). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    this.running = null;
  }

  private async run(): Promise<void> {
    const { name, logger, batch } = this.loop;
    while (!this.stopped) {
      let claimed: number | null = 0;
      try {
        claimed = await this.drainOnce();
        if (claimed !== null) {
          await this.afterDrain();
          if (this.databaseDown) logger.info(`${name}: database reachable again`);
          this.databaseDown = false;
        }
      } catch (err) {
        if (!this.databaseDown) logger.warn({ err: (err as Error).message }, `${name}: cannot reach the database; retrying`);
        this.databaseDown = true;
      }
      if ((claimed ?? 0) < batch && !this.stopped) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.databaseDown ? Math.max(this.loop.pollMs, 2000) : this.loop.pollMs);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wake = null;
      }
    }
  }
}
