/**
 * `/metrics` of each process: the component's registry in the Prometheus text format, plus any extra text
 * (the worker appends the Temporal SDK's own metrics). Gauges that need the database are read at scrape time.
 */
import type { RequestHandler } from 'express';
import { Gauge } from 'prom-client';
import type { Db } from '../db.js';
import { collectProcessMetrics, metricsEnabled, registries, type Component } from './index.js';

/** The whole exposition text of a component (its registry, then `extra`), or null while metrics are off. */
export async function metricsText(component: Component, extra?: () => Promise<string>): Promise<string | null> {
  if (!metricsEnabled()) return null;
  const own = await registries[component].metrics();
  const more = extra ? await extra().catch(() => '') : '';
  return more ? `${own}\n${more}` : own;
}

export const METRICS_CONTENT_TYPE = registries.api.contentType;

/** Express route for GET /metrics; 404 while metrics are off (METRICS_ENABLED=false). */
export function metricsRoute(component: Component, extra?: () => Promise<string>): RequestHandler {
  if (metricsEnabled()) collectProcessMetrics(component);
  return (_req, res, next) => {
    metricsText(component, extra).then((text) => {
      if (text === null) return void res.status(404).json({ code: 'not_found', message: 'metrics are disabled', status: 404 });
      res.setHeader('Content-Type', METRICS_CONTENT_TYPE);
      res.end(text);
    }, next);
  };
}

let gaugeDb: Db | null = null;

/**
 * Turn state from PostgreSQL, read when scraped (any api replica answers the same): conversations holding a
 * turn (running or waiting), turns waiting for a human, and those whose form expires within the hour.
 */
export function registerTurnStateGauges(db: Db): void {
  const first = gaugeDb === null;
  gaugeDb = db;
  if (!first) return;
  const api = [registries.api];
  const waiting = new Gauge({
    name: 'agent_turns_waiting_for_human',
    help: 'Turns paused on an ask_human form that is still waiting for its submission.',
    registers: api,
    async collect() {
      if (gaugeDb) this.set(await gaugeDb.humanInputForm.count({ where: { status: 'waiting' } }));
    },
  });
  const expiring = new Gauge({
    name: 'agent_forms_expiring_soon',
    help: 'Waiting ask_human forms that expire within the next hour (their turns end unanswered).',
    registers: api,
    async collect() {
      const soon = new Date(Date.now() + 3_600_000);
      if (gaugeDb) this.set(await gaugeDb.humanInputForm.count({ where: { status: 'waiting', expires_at: { lt: soon } } }));
    },
  });
  const inFlight = new Gauge({
    name: 'agent_turns_in_flight',
    help: 'Conversations holding their one-turn lock: a turn running or waiting for a human.',
    registers: api,
    async collect() {
      if (gaugeDb) this.set(await gaugeDb.conversation.count({ where: { active_message_id: { not: null } } }));
    },
  });
  void [waiting, expiring, inFlight];
}
