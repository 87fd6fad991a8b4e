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
 *
 * Until the connection listens, a revoke reaches this replica's streams only at the next reconnect's sweep, so the
 * api's /readyz reports `credential_watch: false` meanwhile and the api waits for the first attempt before it serves
 * (api/wire.ts). A start that fails for any reason is retried: a watch that gave up would leave revocation
 * unenforced on this replica for its whole life while everything else looked healthy (a connect that timed out on a
 * loaded machine did exactly that).
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

  /** Those waiting in whenListening(), told when a connection listens. */
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly opts: {
      databaseUrl: string;
      db: Db;
      logger?: Logger;
      /** How long one connect may take (config PG_LISTEN_CONNECT_TIMEOUT_MS). */
      connectTimeoutMs?: number;
    },
  ) {}

  /**
   * Makes the first attempt to listen; resolves when it listens or that attempt failed (never rejects): a failure is
   * logged and retried in the background with backoff, whatever the error, until it listens or stop().
   */
  async start(): Promise<void> {
    try {
      await this.connect();
      if (this.listening) this.opts.logger?.info('credential watch listening');
    } catch (err) {
      this.logFailure(err, 'at start');
      this.reconnect(RECONNECT_MIN_MS);
    }
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== null;
  }

  /** Resolves true once the watch listens (at once if it does), or false after `ms` or at stop(). */
  whenListening(ms: number): Promise<boolean> {
    if (this.listening) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.listeners.delete(onListen);
        resolve(ok);
      };
      const onListen = () => done(this.listening);
      const timer = setTimeout(() => done(false), ms);
      this.listeners.add(onListen);
    });
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
    for (const fn of [...this.listeners]) fn();
  }

  private logFailure(err: unknown, when: string): void {
    const msg = (err as Error).message;
    // Unreachable or slow PostgreSQL is expected during an outage; anything else (a refused login, a bad URL) is
    // an operator's to fix, and revocation is not enforced here until it is.
    if (isDependencyUnavailable(err))
      this.opts.logger?.warn({ err: msg }, `credential watch: could not listen ${when}; retrying (/readyz: credential_watch false)`);
    else this.opts.logger?.error({ err: msg }, `credential watch: could not listen ${when}; retrying (/readyz: credential_watch false)`);
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
      connectionTimeoutMillis: this.opts.connectTimeoutMs ?? 10_000,
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
    for (const fn of [...this.listeners]) fn();
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
        (err: unknown) => {
          this.reconnecting = false;
          if (this.closed) return;
          this.logFailure(err, 'on reconnect');
          this.reconnect(Math.min(delayMs * 2, RECONNECT_MAX_MS));
        },
      );
    }, delayMs);
  }
}
