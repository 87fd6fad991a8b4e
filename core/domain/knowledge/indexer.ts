/**
 * Indexing jobs (issue 28 item 3). A document is written at upload with `status` waiting and its bytes beside it
 * (dataset_document_sources); an indexer claims it under a lease (`lease_owner`, `lease_until`, renewed while it
 * works) and moves it along Dify's indexing_status: waiting → parsing (text extraction, chunking and token counts in
 * a child process with limits, core/domain/knowledge/parse-sandbox.ts) → indexing (embeddings, then the chunks in one
 * transaction) → completed, or error with `error_code` and `error`. Nothing half-indexed stays: the chunks and
 * `completed` are one transaction, and a failure writes no chunk.
 *
 * Every api process runs one (its queue is PostgreSQL: `for update skip locked`), kicked by its own uploads and
 * sweeping every few seconds, so a document whose indexer died (the api restarted mid-parse) is claimed again by any
 * replica once its lease lapses — at most MAX_ATTEMPTS times, then it is `error` `indexing_failed`.
 */
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Db } from '../../platform/db.js';
import type { DatasetDocument } from '../../generated/prisma/client.js';
import type { Logger } from '../../platform/logger.js';
import { vectorLiteral, type Embedder } from './embed.js';
import { KnowledgeError } from './errors.js';
import { DEFAULT_PARSE_LIMITS, documentKind } from './parse.js';
import { prepareInSandbox, type SandboxLimits } from './parse-sandbox.js';
import { chunkOptions } from './chunk-settings.js';

export interface IndexerOptions {
  db: Db;
  embed: Embedder;
  logger?: Logger;
  limits: SandboxLimits;
  /** Documents indexed at once by this process. */
  concurrency: number;
  /** How long a claim holds without renewal, ms (renewed every third of it while the job runs). */
  leaseMs: number;
  /** How often the queue is looked at without a kick, ms. */
  sweepMs: number;
  maxAttempts: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = { ...DEFAULT_PARSE_LIMITS, timeoutMs: 60_000, memoryMb: 2_048 };
export const MAX_ATTEMPTS = 3;

class LostLease extends Error {}

export class DocumentIndexer {
  private readonly opts: IndexerOptions;
  private readonly owner = crypto.randomUUID();
  private readonly events = new EventEmitter();
  private running = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private ticking = false;
  private again = false;

  constructor(opts: Partial<IndexerOptions> & Pick<IndexerOptions, 'db' | 'embed'>) {
    this.opts = {
      limits: DEFAULT_SANDBOX_LIMITS,
      concurrency: 1,
      leaseMs: 60_000,
      sweepMs: 5_000,
      maxAttempts: MAX_ATTEMPTS,
      ...opts,
    };
    this.events.setMaxListeners(0);
  }

  /** Sweeps the queue every sweepMs (the timer does not keep the process alive). */
  start(): this {
    if (this.timer || this.stopped) return this;
    this.timer = setInterval(() => this.kick(), this.opts.sweepMs);
    this.timer.unref();
    this.kick();
    return this;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Claims and runs waiting documents while this process has capacity. */
  kick(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = true;
    void (async () => {
      try {
        do {
          this.again = false;
          while (!this.stopped && this.running < this.opts.concurrency) {
            const claimed = await this.claim(null);
            if (!claimed) break;
            this.running++;
            void this.run(claimed).finally(() => {
              this.running--;
              this.kick();
            });
          }
        } while (this.again && !this.stopped);
      } catch (err) {
        this.opts.logger?.warn({ err: (err as Error)?.message }, 'knowledge indexer: the queue could not be read');
      } finally {
        this.ticking = false;
      }
    })();
  }

  /**
   * Resolves with the document once its indexing ended (completed or error), or null after `ms` (still in progress,
   * or gone). Learns it from this process's jobs at once, from another replica's by polling.
   */
  async waitFor(id: string, ms: number): Promise<DatasetDocument | null> {
    const read = () => this.opts.db.datasetDocument.findUnique({ where: { id } });
    const deadline = Date.now() + ms;
    for (;;) {
      const doc = await read();
      if (!doc || doc.status === 'completed' || doc.status === 'error') return doc;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.events.off(id, done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 250));
        this.events.on(id, done);
      });
    }
  }

  /** Indexes this one document now, in this call (or waits for whoever holds it), and returns it at its end. */
  async indexNow(id: string): Promise<DatasetDocument> {
    const claimed = await this.claim(id);
    if (claimed) await this.run(claimed);
    for (;;) {
      const doc = await this.waitFor(id, 60_000);
      if (doc) return doc;
      const again = await this.claim(id);
      if (again) await this.run(again);
    }
  }

  /** One claimable document (waiting, or in progress under a lapsed lease) → parsing under this indexer's lease. */
  private async claim(id: string | null): Promise<{ id: string; attempts: number } | null> {
    const { db, leaseMs } = this.opts;
    const rows = id
      ? await db.$queryRaw<{ id: string; attempts: number }[]>`
          update dataset_documents d
             set status = 'parsing', attempts = d.attempts + 1, lease_owner = ${this.owner}::uuid,
                 lease_until = now() + make_interval(secs => ${leaseMs / 1000}), processing_started_at = now(), updated_at = now()
           where d.id = (select id from dataset_documents
                          where id = ${id}::uuid
                            and (status = 'waiting' or (status in ('parsing', 'indexing') and lease_until < now()))
                          for update skip locked)
          returning d.id, d.attempts`
      : await db.$queryRaw<{ id: string; attempts: number }[]>`
          update dataset_documents d
             set status = 'parsing', attempts = d.attempts + 1, lease_owner = ${this.owner}::uuid,
                 lease_until = now() + make_interval(secs => ${leaseMs / 1000}), processing_started_at = now(), updated_at = now()
           where d.id = (select id from dataset_documents
                          where status = 'waiting' or (status in ('parsing', 'indexing') and lease_until < now())
                          order by created_at
                          limit 1
                          for update skip locked)
          returning d.id, d.attempts`;
    return rows[0] ?? null;
  }

  private async run(job: { id: string; attempts: number }): Promise<void> {
    const { db, leaseMs } = this.opts;
    const heartbeat = setInterval(() => {
      void db.$executeRaw`
        update dataset_documents set lease_until = now() + make_interval(secs => ${leaseMs / 1000})
         where id = ${job.id}::uuid and lease_owner = ${this.owner}::uuid`.catch(() => undefined);
    }, leaseMs / 3);
    heartbeat.unref();
    try {
      if (job.attempts > this.opts.maxAttempts) {
        await this.fail(job.id, 'indexing_failed', `Indexing stopped ${this.opts.maxAttempts} times before it ended; giving up.`);
        return;
      }
      await this.index(job.id);
    } catch (err) {
      if (err instanceof LostLease) return;
      if (err instanceof KnowledgeError) {
        await this.fail(job.id, err.code, err.message).catch(() => undefined);
        return;
      }
      // Not the document's fault (the database, a bug): back in the queue; the attempts bound it.
      this.opts.logger?.error(
        { err: { message: (err as Error)?.message, stack: (err as Error)?.stack }, document_id: job.id },
        'knowledge indexer: job failed',
      );
      await db.$executeRaw`
        update dataset_documents set status = 'waiting', lease_owner = null, lease_until = null, updated_at = now()
         where id = ${job.id}::uuid and lease_owner = ${this.owner}::uuid`.catch(() => undefined);
    } finally {
      clearInterval(heartbeat);
      this.events.emit(job.id);
    }
  }

  private async index(id: string): Promise<void> {
    const { db } = this.opts;
    const doc = await db.datasetDocument.findUnique({ where: { id }, include: { dataset: true, source: true } });
    if (!doc) return; // deleted meanwhile
    if (!doc.source) throw new KnowledgeError(400, 'document_unreadable', 'The uploaded bytes of this document are gone; upload it again.');
    const kind = documentKind(doc.name, doc.mime_type);
    if (!kind) throw new KnowledgeError(415, 'unsupported_document_type', 'Documents must be plain text, Markdown, HTML or PDF.');
    const { chunks, tokens } = await prepareInSandbox(kind, doc.source.bytes, this.opts.limits, chunkOptions(doc.dataset.chunk_settings));
    const parsed = await db.$executeRaw`
      update dataset_documents set status = 'indexing', parsing_completed_at = now(), updated_at = now()
       where id = ${id}::uuid and lease_owner = ${this.owner}::uuid`;
    if (parsed === 0) throw new LostLease();
    this.events.emit(id);
    const ds = doc.dataset;
    const embeddings =
      ds.embedding_provider && ds.embedding_model
        ? await this.opts.embed({ provider: ds.embedding_provider, model: ds.embedding_model }, chunks)
        : null;
    const positions = chunks.map((_, i) => i);
    const vectors = chunks.map((_, i) => vectorLiteral(embeddings?.[i]));
    await db.$transaction(
      async (tx) => {
        // The fence: only the lease holder writes the chunks (a replica that lost its lease writes nothing).
        const done = await tx.$executeRaw`
          update dataset_documents
             set status = 'completed', error = null, error_code = null, chunk_count = ${chunks.length}, completed_at = now(),
                 lease_owner = null, lease_until = null, updated_at = now()
           where id = ${id}::uuid and lease_owner = ${this.owner}::uuid`;
        if (done === 0) throw new LostLease();
        await tx.documentSegment.deleteMany({ where: { document_id: id } });
        await tx.$executeRaw`
          insert into document_segments (id, tenant_id, dataset_id, document_id, position, content, char_count, token_count, content_tsv, embedding)
          select gen_random_uuid(), ${ds.tenant_id}::uuid, ${ds.id}::uuid, ${id}::uuid, t.position, t.content,
                 char_length(t.content), t.tokens, to_tsvector(${ds.language}::regconfig, t.content), t.embedding::real[]
            from unnest(${positions}::int[], ${chunks}::text[], ${tokens}::int[], ${vectors}::text[]) as t(position, content, tokens, embedding)`;
        await tx.datasetDocumentSource.deleteMany({ where: { document_id: id } });
      },
      { timeout: 120_000 },
    );
  }

  private async fail(id: string, code: string, message: string): Promise<void> {
    const { db } = this.opts;
    await db.$transaction(async (tx) => {
      const n = await tx.$executeRaw`
        update dataset_documents
           set status = 'error', error_code = ${code}, error = ${message.slice(0, 2000)}, chunk_count = 0,
               lease_owner = null, lease_until = null, updated_at = now()
         where id = ${id}::uuid and lease_owner = ${this.owner}::uuid`;
      if (n === 0) return;
      await tx.documentSegment.deleteMany({ where: { document_id: id } });
      await tx.datasetDocumentSource.deleteMany({ where: { document_id: id } });
    });
  }
}
