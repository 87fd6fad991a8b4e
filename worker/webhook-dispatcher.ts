/**
 * Starts a `deliverWebhook` workflow for every delivery row not yet dispatched (rows are written by
 * enqueue_webhook_event inside the transaction that committed the event: migration 20261208000000). Runs in every
 * worker; no leader: a claim is `FOR UPDATE SKIP LOCKED` with a lease (dispatch_after moves forward), and the
 * workflow id is derived from the row id, so two dispatchers starting the same row start one workflow
 * (WorkflowExecutionAlreadyStartedError counts as done).
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { DELIVER_WEBHOOK_WORKFLOW, workflowIdForDelivery, type DeliverWebhookInput } from '../workflows/automation-definitions.js';

const LEASE_S = 30;
const BATCH = 20;

export type WebhookDispatchConfig = Pick<
  Config,
  'TEMPORAL_TASK_QUEUE' | 'WEBHOOK_RETRY_INITIAL_MS' | 'WEBHOOK_RETRY_MAX_INTERVAL_MS' | 'WEBHOOK_RETRY_FOR_MS' | 'WEBHOOK_DISPATCH_POLL_MS'
>;

/** Starts one delivery's workflow (idempotent). */
export async function startDelivery(client: Client, config: WebhookDispatchConfig, deliveryId: string): Promise<void> {
  const input: DeliverWebhookInput = {
    deliveryId,
    retry: {
      initialIntervalMs: config.WEBHOOK_RETRY_INITIAL_MS,
      maximumIntervalMs: config.WEBHOOK_RETRY_MAX_INTERVAL_MS,
      retryForMs: config.WEBHOOK_RETRY_FOR_MS,
    },
  };
  try {
    await client.workflow.start(DELIVER_WEBHOOK_WORKFLOW, {
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowId: workflowIdForDelivery(deliveryId),
      args: [input],
      staticSummary: `Webhook delivery \`${deliveryId}\``,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

export class WebhookDispatcher {
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  constructor(private readonly opts: { db: Db; client: Client; config: WebhookDispatchConfig; logger: Logger }) {}

  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    this.running = null;
  }

  /** Claims due rows and starts their workflows; returns how many were claimed. */
  async drainOnce(): Promise<number> {
    const { db, client, config, logger } = this.opts;
    const rows = await db.$queryRaw<{ id: string }[]>`
      update webhook_deliveries d set dispatch_after = now() + make_interval(secs => ${LEASE_S}::float8)
       where d.id in (select id from webhook_deliveries
                       where dispatched_at is null and dispatch_after <= now()
                       order by dispatch_after limit ${BATCH} for update skip locked)
      returning d.id::text as id`;
    await Promise.all(
      rows.map(async ({ id }) => {
        try {
          await startDelivery(client, config, id);
          await db.$executeRaw`update webhook_deliveries set dispatched_at = now() where id = ${id}::uuid`;
        } catch (err) {
          // The lease brings the row back; Temporal is probably down.
          logger.warn({ delivery_id: id, err: (err as Error).message }, 'webhook delivery could not be started; will retry');
        }
      }),
    );
    return rows.length;
  }

  private async loop(): Promise<void> {
    let failing = false;
    while (!this.stopped) {
      let claimed = 0;
      try {
        claimed = await this.drainOnce();
        failing = false;
      } catch (err) {
        if (!failing) this.opts.logger.warn({ err: (err as Error).message }, 'webhook dispatcher: cannot reach the database; retrying');
        failing = true;
      }
      if (claimed < BATCH && !this.stopped) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(
            resolve,
            failing ? Math.max(2000, this.opts.config.WEBHOOK_DISPATCH_POLL_MS) : this.opts.config.WEBHOOK_DISPATCH_POLL_MS,
          );
          this.wake = () => (clearTimeout(t), resolve());
        });
        this.wake = null;
      }
    }
  }
}
