/**
 * What the gateway reads per model call, kept in process (issue 33 item 2, docs/decisions/0013-gateway-cache.md): a
 * tenant's stored credentials for a provider (decrypted once) and whether its credit pool exists and is used up.
 *
 * Invalidation: triggers on `model_provider_credentials` and `credit_pools` (migration 20261210100000_gateway_cache)
 * NOTIFY `gateway_cache` with `c:<tenant>:<provider>`, `p:<tenant>` or `*`, whoever writes (the console of any api
 * replica, the admin CLI, a direct SQL write). A pool notifies only when its "used up" verdict can change (created,
 * deleted, quota_used crossing quota_limit either way, a limit change), not on each call's increment. The
 * notifications ride on the process's one LISTEN connection (EventNotifier). The bound on staleness:
 *
 * - while the connection does not LISTEN (down, reconnecting) the cache is bypassed, every lookup reads the database;
 *   a (re)subscribe drops everything, since notifications may have been missed;
 * - a fill whose read raced an invalidation is not kept (an epoch taken before the read);
 * - an entry lives at most `ttlMs` (default 5 s), the safety net for a notification lost without the connection
 *   noticing;
 * - so a change is used by the first call that starts after its NOTIFY reached this process (milliseconds after the
 *   writer's commit), and at worst `ttlMs` after the commit.
 *
 * The cache only ever allows: a pool it believes used up is read again (a refusal and the replay check come from the
 * database), so a stale entry cannot refuse a call.
 */
import type { Db } from '../../platform/db.js';
import { onCredentialsWritten, openCredentials, type EncryptionKey } from './credentials.js';
import type { ProviderCredentials } from './provider.js';

export const GATEWAY_CACHE_CHANNEL = 'gateway_cache';
export const GATEWAY_CACHE_TTL_MS = 5_000;

/** The part of EventNotifier the cache needs (core/protocol/event-log.ts). */
export interface InvalidationSource {
  listensTo(channel: string): boolean;
  onChannel(channel: string, fn: (payload?: string) => void): () => void;
}

/** A tenant's stored credentials for one provider: the row's ciphertext (null: no row), decrypted at most once per key. */
export class StoredCredentials {
  private opened: { key: EncryptionKey; value: ProviderCredentials | Error } | null = null;

  constructor(
    readonly provider: string,
    readonly encrypted: string | null,
  ) {}

  /** null without a row; throws CredentialsDecryptError when it cannot be decrypted with `key`. */
  open(key: EncryptionKey): ProviderCredentials | null {
    if (this.encrypted === null) return null;
    const o = this.opened;
    if (!o || !sameKey(o.key, key)) {
      let value: ProviderCredentials | Error;
      try {
        value = openCredentials(key, this.provider, this.encrypted);
      } catch (err) {
        value = err as Error;
      }
      this.opened = { key, value };
      if (value instanceof Error) throw value;
      return value;
    }
    if (o.value instanceof Error) throw o.value;
    return o.value;
  }
}

const sameKey = (a: EncryptionKey, b: EncryptionKey) =>
  a === b || (typeof a !== 'string' && typeof b !== 'string' && a.length === b.length && a.equals(b));

/** A tenant's credit pool as the quota check needs it: none (unmetered), or whether it is used up. */
export type PoolState = { exists: false } | { exists: true; exhausted: boolean };

interface Entry<T> {
  value: T;
  expires: number;
}

export interface GatewayCacheOptions {
  ttlMs?: number;
  now?: () => number;
  /** Called after each invalidation is applied (tests wait on it instead of sleeping). */
  onInvalidate?: (payload: string | undefined) => void;
}

export class GatewayCache {
  private readonly credentials = new Map<string, Entry<StoredCredentials>>();
  private readonly pools = new Map<string, Entry<PoolState>>();
  private epoch = 0;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly source: InvalidationSource,
    private readonly opts: GatewayCacheOptions = {},
  ) {
    this.ttlMs = opts.ttlMs ?? GATEWAY_CACHE_TTL_MS;
    this.now = opts.now ?? Date.now;
    this.unsubscribe = source.onChannel(GATEWAY_CACHE_CHANNEL, (payload) => this.invalidate(payload));
  }

  /** True while invalidations arrive: otherwise every lookup misses (and nothing is kept). */
  get active(): boolean {
    return this.source.listensTo(GATEWAY_CACHE_CHANNEL);
  }

  /** Taken before a read whose result is then `put`: a fill that raced an invalidation is dropped. */
  token(): number {
    return this.epoch;
  }

  getCredentials(tenantId: string, provider: string): StoredCredentials | undefined {
    return this.get(this.credentials, `${tenantId}:${provider}`);
  }

  putCredentials(token: number, tenantId: string, provider: string, encrypted: string | null): StoredCredentials {
    const value = new StoredCredentials(provider, encrypted);
    this.put(this.credentials, token, `${tenantId}:${provider}`, value);
    return value;
  }

  getPool(tenantId: string): PoolState | undefined {
    return this.get(this.pools, tenantId);
  }

  putPool(token: number, tenantId: string, pool: PoolState): void {
    this.put(this.pools, token, tenantId, pool);
  }

  /** This process just moved the tenant's pool (a call's increment): its verdict, fresh from the write, replaces the entry. */
  notePool(tenantId: string, exhausted: boolean): void {
    if (this.pools.has(tenantId)) this.put(this.pools, this.epoch, tenantId, { exists: true, exhausted });
  }

  /** The stored credentials through the cache (one indexed read on a miss). */
  async storedCredentials(db: Pick<Db, 'modelProviderCredential'>, tenantId: string, provider: string): Promise<StoredCredentials> {
    const hit = this.getCredentials(tenantId, provider);
    if (hit) return hit;
    const token = this.token();
    const row = await db.modelProviderCredential.findUnique({
      where: { tenant_id_provider: { tenant_id: tenantId, provider } },
      select: { encrypted_config: true },
    });
    return this.putCredentials(token, tenantId, provider, row?.encrypted_config ?? null);
  }

  /** Applies one `gateway_cache` payload (none: anything may have changed). */
  invalidate(payload: string | undefined): void {
    this.epoch++;
    const m = payload ? /^(c|p):([^:]+)(?::(.+))?$/.exec(payload) : null;
    if (!m) {
      this.credentials.clear();
      this.pools.clear();
    } else if (m[1] === 'c') {
      if (m[3] !== undefined) this.credentials.delete(`${m[2]}:${m[3]}`);
      else for (const k of this.credentials.keys()) if (k.startsWith(`${m[2]}:`)) this.credentials.delete(k);
    } else {
      this.pools.delete(m[2]!);
    }
    this.opts.onInvalidate?.(payload);
  }

  close(): void {
    this.unsubscribe();
    this.credentials.clear();
    this.pools.clear();
  }

  private get<T>(map: Map<string, Entry<T>>, key: string): T | undefined {
    const e = map.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now() || !this.active) {
      map.delete(key);
      return undefined;
    }
    return e.value;
  }

  private put<T>(map: Map<string, Entry<T>>, token: number, key: string, value: T): void {
    if (token !== this.epoch || !this.active) return;
    map.set(key, { value, expires: this.now() + this.ttlMs });
  }
}

// ---- the process's cache ----------------------------------------------------------------------

let processCache: GatewayCache | null = null;

/**
 * The cache of this process's gateway (set by the inner LLM router when it has a notifier): a worker in the same
 * process reads the credentials of a turn's preparation through it too (tenant-model.ts, model-check.ts).
 */
export function setProcessGatewayCache(cache: GatewayCache | null): void {
  processCache = cache;
  onCredentialsWritten(cache ? (tenantId, provider) => cache.invalidate(`c:${tenantId}:${provider}`) : null);
}

export function processGatewayCache(): GatewayCache | null {
  return processCache;
}

/** A tenant's stored credentials for a provider: through the process's cache when there is one, else one read. */
export async function readStoredCredentials(
  db: Pick<Db, 'modelProviderCredential'>,
  tenantId: string,
  provider: string,
): Promise<StoredCredentials> {
  if (processCache) return processCache.storedCredentials(db, tenantId, provider);
  const row = await db.modelProviderCredential.findUnique({
    where: { tenant_id_provider: { tenant_id: tenantId, provider } },
    select: { encrypted_config: true },
  });
  return new StoredCredentials(provider, row?.encrypted_config ?? null);
}
