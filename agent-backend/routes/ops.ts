/**
 * The backend's operator endpoints besides the cheap `/healthz`: `GET /readyz` (its run store in PostgreSQL and
 * the api's inner endpoint it calls for every model request are reachable; 503 otherwise) and `GET /metrics`
 * (Prometheus; docs/operations.md "Observability"). Unauthenticated like /healthz: they carry no tenant data. /readyz also reports the
 * agent shell's isolation in force (`isolation`: Landlock ABI, namespaces, seccomp, limits mechanism, uid switch).
 */
import { Router } from 'express';
import { Gauge } from 'prom-client';
import { metricsRoute } from '../../core/platform/metrics/http.js';
import { registries } from '../../core/platform/metrics/index.js';
import type { PgRunStore } from '../store.js';
import type { IsolationReport } from '../workspace/sandbox.js';

const CHECK_MS = 2000;

function within(ms: number, p: () => Promise<unknown>): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p().then(
      () => (clearTimeout(t), resolve(true)),
      () => (clearTimeout(t), resolve(false)),
    );
  });
}

let activeRuns: () => number = () => 0;
let activeGauge: Gauge | null = null;

export function opsRoutes(deps: {
  store: PgRunStore;
  apiUrl: string;
  activeRuns: () => number;
  /** The agent shell's isolation in force (issue 27): reported, not a readiness condition. */
  isolation?: () => IsolationReport;
}): Router {
  activeRuns = deps.activeRuns;
  activeGauge ??= new Gauge({
    name: 'agent_backend_runs_active',
    help: 'Runs executing in this agent backend process.',
    registers: [registries.agent_backend],
    collect() {
      this.set(activeRuns());
    },
  });
  const r = Router();
  r.get('/readyz', async (_req, res) => {
    const [database, innerApi] = await Promise.all([
      within(CHECK_MS, () => deps.store.ping()),
      within(CHECK_MS, () =>
        fetch(`${deps.apiUrl.replace(/\/+$/, '')}/healthz`, { signal: AbortSignal.timeout(CHECK_MS) }).then((x) =>
          x.ok ? x : Promise.reject(new Error(String(x.status))),
        ),
      ),
    ]);
    const ok = database && innerApi;
    res.status(ok ? 200 : 503).json({
      status: ok ? 'ok' : 'unavailable',
      checks: { database, inner_api: innerApi },
      ...(deps.isolation ? { isolation: deps.isolation() } : {}),
    });
  });
  r.get('/metrics', metricsRoute('agent_backend'));
  return r;
}
