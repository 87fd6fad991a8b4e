/**
 * Per-key and per-end-user limits of the public API (issue 17 L6), shared by every api replica through
 * PostgreSQL (the `rate_limits` table of rate-limiter-flexible's RateLimiterPostgres; the public API's counters of one
 * request are taken in one statement of the same arithmetic, `upsertCounters`, the console's through the library):
 *
 * - request rate: RATE_LIMIT_KEY_PER_MINUTE per app key, RATE_LIMIT_USER_PER_MINUTE per (app, user) on
 *   requests that name a user;
 * - concurrent event streams (a chat request, blocking or streaming, or a re-attach to a turn's events):
 *   STREAMS_PER_KEY / STREAMS_PER_USER, counted up when the stream opens and down when its response closes
 *   (a counter left by a crashed replica expires after an hour);
 * - concurrent turns in progress (pending or running messages, counted from the messages themselves, so
 *   nothing can leak): TURNS_PER_KEY per app, TURNS_PER_USER per end user.
 *
 * The console's debugger gets the same three per console key (`consoleMiddleware`): request rate
 * (RATE_LIMIT_KEY_PER_MINUTE), open debugger streams (STREAMS_PER_KEY) and debugger turns in progress per account
 * (TURNS_PER_USER), under their own counters.
 *
 * Over a limit: 429 `too_many_requests` with Retry-After. When PostgreSQL cannot answer a limiter, the
 * request goes through (an outage must not turn into refusals; the routes' own 503s still apply).
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { hashApiKey } from '../core/domain/api-keys.js';
import type { Config } from '../core/platform/config.js';
import type { Db } from '../core/platform/db.js';
import type { Logger } from '../core/platform/logger.js';
import { appCtx } from './auth.js';
import { HttpError } from './errors.js';
import { upsertCounters } from '../core/platform/rate-counters.js';

export type RateLimitConfig = Pick<
  Config,
  'RATE_LIMIT_KEY_PER_MINUTE' | 'RATE_LIMIT_USER_PER_MINUTE' | 'STREAMS_PER_KEY' | 'STREAMS_PER_USER' | 'TURNS_PER_KEY' | 'TURNS_PER_USER'
>;

/**
 * The node-postgres `query({text, values})` shape RateLimiterPostgres uses, over the api's Prisma pool (one
 * pool per process). `expire` is bigint in the table: returned as a number, as node-postgres would not.
 */
function prismaStore(db: Db) {
  return {
    query: async (q: { text: string; values?: unknown[] }) => {
      const rows = await db.$queryRawUnsafe<Record<string, unknown>[]>(q.text, ...(q.values ?? []));
      const fixed = rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])));
      return { rows: fixed, rowCount: fixed.length };
    },
  };
}

const TABLE = 'rate_limits';
const STREAM_COUNTER_TTL_S = 3_600;

export { upsertCounters };

type Deps = { db: Db; config: RateLimitConfig; logger: Logger };

/** The public API's and the console's limits, as two middlewares. */
export function createRateLimits(deps: Deps): { middleware: RequestHandler; consoleMiddleware: RequestHandler } {
  return { middleware: publicApiLimits(deps), consoleMiddleware: consoleLimits(deps) };
}

// What a request is, and whose: the key's hash, the end user it names, whether it opens a stream or starts a turn.
const keyOf = (req: Request) => hashApiKey(/^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '').slice(0, 32);
const userOf = (req: Request): string | null => {
  const fromBody = req.body && typeof req.body === 'object' ? (req.body as { user?: unknown }).user : undefined;
  const u = typeof fromBody === 'string' ? fromBody : typeof req.query.user === 'string' ? req.query.user : null;
  return u && u.length <= 255 && !u.includes('\u0000') ? u : null;
};
const isStream = (req: Request) =>
  (req.method === 'POST' && req.path === '/chat-messages') || (req.method === 'GET' && /^\/chat-messages\/[^/]+\/events$/.test(req.path));
const isTurnStart = (req: Request) =>
  req.method === 'POST' && (req.path === '/chat-messages' || /^\/form\/human_input\/[^/]+$/.test(req.path));
const DEBUG = '^/apps/[^/]+/agent/debug';
const isDebugStream = (req: Request) =>
  (req.method === 'POST' && new RegExp(`${DEBUG}/chat-messages$`).test(req.path)) ||
  (req.method === 'GET' && new RegExp(`${DEBUG}/chat-messages/[^/]+/events$`).test(req.path));
const isDebugTurnStart = (req: Request) =>
  req.method === 'POST' && (new RegExp(`${DEBUG}/chat-messages$`).test(req.path) || new RegExp(`${DEBUG}/forms/[^/]+$`).test(req.path));

function tooMany(res: Response, what: string, retryAfterS: number): HttpError {
  res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfterS))));
  return new HttpError(429, 'too_many_requests', `Too many ${what}; retry later.`);
}

// The public API's counters (rows `<prefix>:<key>`, as rate-limiter-flexible names them), taken in one statement per round.
type Counter = { prefix: string; limit: number; durationS: number };
type Take = { counter: Counter; key: string };

/**
 * Consumes one point of each counter in one statement: per take whether it is within its limit, and how long until
 * its window ends when not. A store failure lets everything through (as the console's `take` does).
 */
async function takeAll(db: Db, logger: Logger, takes: Take[]): Promise<{ ok: boolean; msBeforeNext: number }[]> {
  try {
    const rows = await upsertCounters(
      db,
      takes.map((t) => ({ key: `${t.counter.prefix}:${t.key}`, points: 1, durationS: t.counter.durationS })),
    );
    return takes.map((t) => {
      const row = rows.get(`${t.counter.prefix}:${t.key}`);
      if (!row) return { ok: true, msBeforeNext: 0 };
      const msBeforeNext = row.expire === null ? -1 : Math.max(row.expire - Date.now(), 0);
      return { ok: row.points <= t.counter.limit, msBeforeNext };
    });
  } catch (err) {
    logger.warn({ err: (err as Error)?.message }, 'rate limit store unavailable; request let through');
    return takes.map(() => ({ ok: true, msBeforeNext: 0 }));
  }
}

/** Gives one point of each counter back, in one statement (a concurrency counter's release). */
function giveAll(db: Db, takes: Take[]): void {
  void upsertCounters(
    db,
    takes.map((t) => ({ key: `${t.counter.prefix}:${t.key}`, points: -1, durationS: t.counter.durationS })),
  ).catch(() => undefined);
}

/** Mount on /v1 after the key check and body parsing. */
function publicApiLimits({ db, config, logger }: Deps): RequestHandler {
  const keyRate: Counter = { prefix: 'rate_key', limit: config.RATE_LIMIT_KEY_PER_MINUTE, durationS: 60 };
  const userRate: Counter = { prefix: 'rate_user', limit: config.RATE_LIMIT_USER_PER_MINUTE, durationS: 60 };
  const keyStreams: Counter = { prefix: 'streams_key', limit: config.STREAMS_PER_KEY, durationS: STREAM_COUNTER_TTL_S };
  const userStreams: Counter = { prefix: 'streams_user', limit: config.STREAMS_PER_USER, durationS: STREAM_COUNTER_TTL_S };

  /** Turns in progress of an app's end user (by session id): one statement, none when the user is new. */
  const userTurnsInProgress = async (appId: string, user: string): Promise<number> => {
    const rows = await db.$queryRaw<{ n: number }[]>`
      select count(*)::int as n from messages m join end_users e on e.id = m.end_user_id
       where e.app_id = ${appId}::uuid and e.session_id = ${user} and m.status in ('pending', 'running')`;
    return rows[0]?.n ?? 0;
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const app = appCtx(req);
      const key = keyOf(req);
      const user = userOf(req);
      const userKey = user ? `${app.appId}:${user}` : null;
      // Every check runs side by side, in one round of round trips (this sits in front of every request, and a turn's
      // first token waits for it), the counters in one statement; a stream slot taken for a request refused for another
      // reason is given back.
      const turnStart = isTurnStart(req);
      const stream = isStream(req);
      const inProgress = { in: ['pending', 'running'] as ('pending' | 'running')[] };
      const takes: Take[] = [{ counter: keyRate, key }];
      if (userKey) takes.push({ counter: userRate, key: userKey });
      const streamTakes: Take[] = stream ? [{ counter: keyStreams, key }] : [];
      if (stream && userKey) streamTakes.push({ counter: userStreams, key: userKey });
      const [taken, appTurns, userTurns] = await Promise.all([
        takeAll(db, logger, [...takes, ...streamTakes]),
        turnStart ? db.message.count({ where: { app_id: app.appId, status: inProgress } }) : 0,
        turnStart && user ? userTurnsInProgress(app.appId, user) : 0,
      ]);
      const keyRated = taken[0]!;
      const userRated = userKey ? taken[1]! : { ok: true, msBeforeNext: 0 };
      const [keyIn, userIn] = [taken[takes.length]?.ok ?? true, taken[takes.length + 1]?.ok ?? true];
      const refusal = !keyRated.ok
        ? tooMany(res, 'requests for this key', keyRated.msBeforeNext / 1000)
        : !userRated.ok
          ? tooMany(res, 'requests for this user', userRated.msBeforeNext / 1000)
          : appTurns >= config.TURNS_PER_KEY
            ? tooMany(res, 'turns in progress for this app', 5)
            : userTurns >= config.TURNS_PER_USER
              ? tooMany(res, 'turns in progress for this user', 5)
              : !keyIn || !userIn
                ? tooMany(res, keyIn ? 'open streams for this user' : 'open streams for this key', 5)
                : null;
      if (stream) {
        // A refused consume still counted: concurrency counters give it back at once (so does a refused request).
        const release = () => giveAll(db, streamTakes);
        if (refusal) release();
        else res.once('close', release);
      }
      if (refusal) return next(refusal);
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** Mount in the console router after its key check (issue 17 L6: debugger streams and turns are capped too). */
function consoleLimits({ db, config, logger }: Deps): RequestHandler {
  const store = prismaStore(db);
  const limiter = (keyPrefix: string, points: number, duration: number) =>
    new RateLimiterPostgres({
      storeClient: store,
      storeType: 'client',
      tableName: TABLE,
      tableCreated: true,
      clearExpiredByTimeout: false,
      keyPrefix,
      points,
      duration,
    });
  /** true: consumed; false: over the limit (`msBeforeNext` set); a store failure counts as consumed. */
  const take = async (l: RateLimiterPostgres, key: string, out: { msBeforeNext?: number }): Promise<boolean> => {
    try {
      await l.consume(key, 1);
      return true;
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        out.msBeforeNext = err.msBeforeNext;
        return false;
      }
      logger.warn({ err: (err as Error)?.message }, 'rate limit store unavailable; request let through');
      return true;
    }
  };
  const give = (l: RateLimiterPostgres, key: string) => void l.reward(key, 1).catch(() => undefined);
  const consoleRate = limiter('console_rate', config.RATE_LIMIT_KEY_PER_MINUTE, 60);
  const consoleStreams = limiter('console_streams', config.STREAMS_PER_KEY, STREAM_COUNTER_TTL_S);

  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const caller = req.consoleCtx;
      if (!caller) return next();
      const key = keyOf(req);
      const r: { msBeforeNext?: number } = {};
      if (!(await take(consoleRate, key, r))) return next(tooMany(res, 'requests for this console key', (r.msBeforeNext ?? 1000) / 1000));
      if (isDebugTurnStart(req)) {
        const appId = /^\/apps\/([^/]+)\//.exec(req.path)?.[1] ?? '';
        // By app and status first (the messages(app_id, status) index), then the account.
        const inProgress = /^[0-9a-f-]{36}$/i.test(appId)
          ? await db.message.count({ where: { app_id: appId, account_id: caller.accountId, status: { in: ['pending', 'running'] } } })
          : 0;
        if (inProgress >= config.TURNS_PER_USER) return next(tooMany(res, 'debugger turns in progress for this account', 5));
      }
      if (isDebugStream(req)) {
        if (!(await take(consoleStreams, key, r))) {
          give(consoleStreams, key);
          return next(tooMany(res, 'open debugger streams for this console key', 5));
        }
        res.once('close', () => give(consoleStreams, key));
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}
