/**
 * The run protocol (docs/PROTOCOL.md §2): create, status, events page, events SSE, cancel.
 */
import crypto from 'node:crypto';
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from '../../core/platform/logger.js';
import { CancelRunRequest, isTerminal, type RunStatus } from '../../core/protocol/run.js';
import { startSse, writeSse, writeSseComment } from '../../core/platform/sse.js';
import { planRun, type RunLimits } from '../composition.js';
import { formatZodError, HttpError } from '../errors.js';
import type { ModuleRegistry } from '../modules/registry.js';
import type { RunManager } from '../run-manager.js';
import { isConnectionError, type PgRunStore, type RunRow } from '../store.js';

export interface RunRoutesDeps {
  store: PgRunStore;
  runs: RunManager;
  registry: ModuleRegistry;
  limits: RunLimits;
  logger: Logger;
  instanceId: string;
  pollMs: number;
  keepAliveMs: number;
  /** Runs this process executes at once (MAX_RUNS_PER_BACKEND); 0: no cap. */
  maxRuns: number;
}

const MAX_PAGE = 500;
const DEFAULT_PAGE = 100;

export function runRoutes(deps: RunRoutesDeps): Router {
  const { store, runs } = deps;
  const router = express.Router();
  // A run id no run can have (NUL, which PostgreSQL text refuses, or absurdly long) is not found, not a 500 (issue 28 fuzzer).
  router.param('id', (_req, _res, next, id: string) => {
    next(id.includes('\u0000') || id.length > 200 ? new HttpError(404, 'run_not_found', 'run not found') : undefined);
  });

  // Creates admitted but not yet started (their insert is in flight): counted with the active runs, so two
  // concurrent creates cannot both take the last slot.
  let starting = 0;
  const atCapacity = () => deps.maxRuns > 0 && runs.activeRunIds.length + starting >= deps.maxRuns;

  router.post('/runs', async (req, res) => {
    // Validation happens entirely before any I/O.
    const plan = planRun(req.body ?? {}, deps.registry, deps.limits);
    const idempotencyKey = plan.request.idempotency_key ?? null;
    if (atCapacity()) {
      // A repeated create of a run that exists is no new work: answer it as ever, even when full.
      const existing = idempotencyKey ? await store.findRunByIdempotencyKey(idempotencyKey) : null;
      if (!existing) throw new HttpError(503, 'backend_busy', `this agent backend is at capacity (${deps.maxRuns} runs); retry shortly`);
      res.status(202).json({ run_id: existing.run_id, status: existing.status });
      return;
    }
    starting += 1;
    try {
      const runId = crypto.randomUUID();
      // Started inside the creating scope: a repeated create racing this one never sees the run neither creating nor active.
      const { run, created } = await runs.creatingRun(runId, async () => {
        const r = await store.createRun({
          runId,
          idempotencyKey,
          purpose: plan.request.purpose,
          request: plan.request,
          ownerId: deps.instanceId,
        });
        if (r.created) runs.start(r.run.run_id, plan);
        return r;
      });
      // The same key again: a create whose insert committed but whose answer was lost left a run nobody executes;
      // it starts now (issue 30) rather than waiting for the reaper to fail it.
      if (!created) await runs.adoptIfUnstarted(run, plan);
      res.status(202).json({ run_id: run.run_id, status: run.status });
    } finally {
      starting -= 1;
    }
  });

  router.get('/runs/:id', async (req, res) => {
    const run = await mustGetRun(store, req.params.id);
    res.json(statusBody(run));
  });

  router.get('/runs/:id/events', async (req, res) => {
    const after = parseCursor(req.query.after);
    const limit = parseLimit(req.query.limit);
    const run = await mustGetRun(store, req.params.id);
    const events = await store.listEvents(run.run_id, after, limit);
    res.json({
      run_id: run.run_id,
      events,
      next_cursor: events.length ? events[events.length - 1].id : req.query.after !== undefined ? String(after) : null,
    });
  });

  router.get('/runs/:id/events/sse', async (req, res) => {
    // Last-Event-ID (a reconnecting EventSource) wins over the `after` of the original URL.
    const header = req.get('last-event-id');
    const after = parseCursor(header !== undefined && header !== '' ? header : req.query.after);
    const run = await mustGetRun(store, req.params.id);
    await streamEvents(deps, req, res, run.run_id, after);
  });

  router.post('/runs/:id/cancel', async (req, res) => {
    const body = CancelRunRequest.safeParse(req.body ?? {});
    if (!body.success) throw new HttpError(400, 'invalid_request', formatZodError(body.error));
    const outcome = await store.requestCancel(req.params.id, body.data.reason ?? null, body.data.message ?? null);
    switch (outcome.kind) {
      case 'not_found':
        throw new HttpError(404, 'run_not_found', `run ${req.params.id} not found`);
      case 'ended':
        throw new HttpError(409, 'run_already_ended', `run ${req.params.id} already ended as ${outcome.run.status}`);
      case 'already_cancelled':
        res.status(200).json({ run_id: outcome.run.run_id, status: 'cancelled' satisfies RunStatus });
        return;
      case 'requested':
        // Owned here: abort now. Owned elsewhere: the NOTIFY (or heartbeat poll) reaches the owner.
        runs.cancelLocal(outcome.run.run_id, outcome.run.cancel_reason, outcome.run.cancel_message);
        res.status(202).json({ run_id: outcome.run.run_id, status: outcome.run.status });
        return;
    }
  });

  return router;
}

async function streamEvents(deps: RunRoutesDeps, req: Request, res: Response, runId: string, after: number): Promise<void> {
  const waiter = deps.runs.hub.subscribe(runId);
  let open = true;
  res.on('close', () => {
    open = false;
    waiter.close();
  });
  startSse(res);
  const keepAlive = setInterval(() => writeSseComment(res, 'keep-alive'), deps.keepAliveMs);
  let cursor = after;
  try {
    while (open) {
      let events: Awaited<ReturnType<typeof deps.store.listEvents>>;
      try {
        events = await deps.store.listEvents(runId, cursor, MAX_PAGE);
        for (const e of events) {
          if (!open) return;
          writeSse(res, { id: e.id, event: e.type, data: e });
          cursor = Number(e.id);
          if (isTerminal(e)) return;
        }
        if (events.length === MAX_PAGE) continue;
        if (events.length === 0) {
          // Nothing new: a deleted run, or an ended run whose terminal the client already has
          // (the status flips in the same statement that stores the terminal, so re-check once).
          const run = await deps.store.getRun(runId);
          if (!run) return;
          if (run.status !== 'running') {
            if ((await deps.store.listEvents(runId, cursor, 1)).length === 0) return;
            continue;
          }
        }
      } catch (err) {
        // PostgreSQL away: keep the stream (keep-alives go on) and re-read from the cursor once it is
        // back; the poll below is the safety net for NOTIFYs lost meanwhile.
        if (!isConnectionError(err)) throw err;
      }
      await waiter.wait(deps.pollMs, cursor);
    }
  } catch (err) {
    deps.logger.warn({ err, runId }, 'agent backend: SSE stream failed');
  } finally {
    clearInterval(keepAlive);
    waiter.close();
    if (!res.writableEnded) res.end();
  }
}

async function mustGetRun(store: PgRunStore, runId: string): Promise<RunRow> {
  const run = await store.getRun(runId);
  if (!run) throw new HttpError(404, 'run_not_found', `run ${runId} not found`);
  return run;
}

function statusBody(run: RunRow) {
  return {
    run_id: run.run_id,
    status: run.status,
    created_at: run.created_at,
    updated_at: run.updated_at,
    error: run.error,
    error_type: run.error_type,
  };
}

function parseCursor(v: unknown): number {
  if (v === undefined || v === '') return 0;
  if (typeof v !== 'string' || !/^\d{1,15}$/.test(v))
    throw new HttpError(400, 'invalid_request', 'after must be an event id (a decimal number)');
  return Number(v);
}

function parseLimit(v: unknown): number {
  if (v === undefined || v === '') return DEFAULT_PAGE;
  const n = typeof v === 'string' && /^\d{1,4}$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE)
    throw new HttpError(400, 'invalid_request', `limit must be an integer from 1 to ${MAX_PAGE}`);
  return n;
}
