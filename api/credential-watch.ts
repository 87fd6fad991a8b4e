/**
 * Revoking an app API key ends its open streams on every api replica (issue 47): a trigger on api_tokens NOTIFYs
 * `api_token_revoked` with the key's id when it is revoked or deleted (migration 20261213010000_credential_revoked),
 * and each replica's watch LISTENs on one connection of its own and calls the handlers of the streams that key holds
 * open here (api/turns/stream.ts writes the final `error` event `api_key_revoked` and closes). It also drops the key
 * from this process's auth cache, so the next request is refused at once rather than within the cache's 5 s.
 *
 * A NOTIFY sent while the connection is down is lost: after every reconnect (PostgreSQL restarted, failed over) the
 * watch reads the keys of the streams it holds and ends those revoked meanwhile. A stream also checks its key once
 * when it starts (hold), since a request let through by another replica's auth cache may start after the NOTIFY.
 */
import pg from 'pg';
import type { Db } from '../core/platform/db.js';
import { isDependencyUnavailable } from '../core/platform/dependency-errors.js';
import type { Logger } from '../core/platform/logger.js';
import { evictAppKeyId } from './auth.js';

/** The channel the api_tokens trigger notifies; the payload is the key's id, or '*' (a TRUNCATE: check them all). */
export const API_TOKEN_REVOKED_CHANNEL = 'api_token_revoked';

/** Its connection's application_name (pg_stat_activity shows which connection is the watch's). */
export const CREDENTIAL_WATCH_APPLICATION = 'api-credential-watch';

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 5000;

export class CredentialWatch {
  private client: pg.Client | null = null;
  private closed = false;
  private reconnecting = false;
  /** The handlers of the streams open in this process, by key id. */
  private readonly holders = new Map<string, Set<() => void>>();

  constructor(private readonly opts: { databaseUrl: string; db: Db; logger?: Logger }) {}

  /** Starts listening; PostgreSQL unreachable now is retried in the background (as the event notifier does). */
  async start(): Promise<void> {
    try {
      await this.connect();
    } catch (err) {
      if (!isDependencyUnavailable(err)) throw err;
      this.opts.logger?.warn({ err: (err as Error).message }, 'credential watch: PostgreSQL unreachable at start; retrying');
      this.reconnect(RECONNECT_MIN_MS);
    }
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== null;
  }

  /**
   * Registers an open stream of key `tokenId`: `onRevoked` is called once if the key is (or already was) revoked or
   * deleted. The returned function unregisters it (call it when the stream ends).
   */
  hold(tokenId: string, onRevoked: () => void): () => void {
    let fired = false;
    const fn = () => {
      if (fired) return;
      fired = true;
      onRevoked();
    };
    let set = this.holders.get(tokenId);
    if (!set) this.holders.set(tokenId, (set = new Set()));
    set.add(fn);
    void this.check([tokenId]);
    return () => {
      const s = this.holders.get(tokenId);
      if (!s) return;
      s.delete(fn);
      if (s.size === 0) this.holders.delete(tokenId);
    };
  }

  /** How many streams this process holds open per key (for tests and logs). */
  heldStreams(tokenId: string): number {
    return this.holders.get(tokenId)?.size ?? 0;
  }

  async stop(): Promise<void> {
    this.closed = true;
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }

  private revoked(tokenId: string): void {
    evictAppKeyId(tokenId);
    const set = this.holders.get(tokenId);
    if (!set) return;
    this.holders.delete(tokenId);
    if (set.size) this.opts.logger?.info({ api_token_id: tokenId, streams: set.size }, 'app key revoked: ending its open streams');
    for (const fn of set) fn();
  }

  /** Ends the streams of those of `ids` that are revoked or gone; a failed read is retried while the watch runs. */
  private async check(ids: string[], attempt = 0): Promise<void> {
    if (ids.length === 0) return;
    try {
      const live = await this.opts.db.apiToken.findMany({ where: { id: { in: ids }, revoked_at: null }, select: { id: true } });
      const ok = new Set(live.map((r) => r.id));
      for (const id of ids) if (!ok.has(id)) this.revoked(id);
    } catch (err) {
      if (this.closed) return;
      this.opts.logger?.warn({ err: (err as Error).message }, 'credential watch: could not read the keys of open streams; retrying');
      setTimeout(
        () =>
          void this.check(
            ids.filter((id) => this.holders.has(id)),
            attempt + 1,
          ),
        Math.min(RECONNECT_MIN_MS * 2 ** attempt, RECONNECT_MAX_MS),
      );
    }
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.opts.databaseUrl,
      connectionTimeoutMillis: 5_000,
      application_name: CREDENTIAL_WATCH_APPLICATION,
    });
    client.on('notification', (n) => {
      if (n.channel !== API_TOKEN_REVOKED_CHANNEL || !n.payload) return;
      if (n.payload === '*') {
        evictAppKeyId('*');
        void this.check([...this.holders.keys()]);
      } else this.revoked(n.payload);
    });
    client.on('error', (err) => {
      if (this.client === client) this.client = null;
      if (this.closed) return;
      this.opts.logger?.warn({ err: err.message }, 'credential watch connection lost; reconnecting');
      this.reconnect(RECONNECT_MIN_MS);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${API_TOKEN_REVOKED_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Whatever was revoked while no one listened: the auth cache may hold it, and its streams must end.
    evictAppKeyId('*');
    await this.check([...this.holders.keys()]);
  }

  /** Retries connect() with backoff until it works (a PostgreSQL restart or failover can take a minute). */
  private reconnect(delayMs: number): void {
    if (this.closed || this.reconnecting) return;
    this.reconnecting = true;
    setTimeout(() => {
      this.connect().then(
        () => {
          this.reconnecting = false;
          if (!this.closed) this.opts.logger?.info('credential watch reconnected');
        },
        () => {
          this.reconnecting = false;
          this.reconnect(Math.min(delayMs * 2, RECONNECT_MAX_MS));
        },
      );
    }, delayMs);
  }
}
