/**
 * The process-level guard (issue 28 item 1), installed once by every entry point: api/main.ts, worker.ts,
 * agent-backend/main.ts and `npm start` (stack/dev.ts), where one process hosts the api, the worker and the agent
 * backend at once.
 *
 * It is the second line of defence. The first is that every stream a request touches has its `error` handled
 * where it is read (multipart parts, remote downloads, backend and provider streams): a client's mistake is a 4xx
 * with a code. Whatever still slips through — an `error` event nobody listened to, a promise nobody awaited — would
 * by Node's default end the process, and with it every other request, every turn in flight, and under `npm start`
 * the worker and the agent backend too: one truncated upload would take the whole deployment down.
 *
 * What it keeps running, and why: the process. Such an error belongs to one request or one connection (an emitter
 * of that request's), not to the process' shared state — PostgreSQL holds the state, Temporal the turns, and both
 * are reached through pools that recover by themselves. Exiting would turn one client's bad request into an outage
 * for all of them. It never hides the error: each one is logged at `fatal` with its stack and counted in
 * `agent_process_uncaught_errors_total{kind}` (on every component's /metrics), so an alert on that counter finds
 * the missing handler, which is then a bug to fix. Operators who prefer crash-and-restart (a supervisor that
 * restarts the process) set UNCAUGHT_ERROR_POLICY=exit: the error is logged and counted, then the process exits 1.
 */
import { Counter } from 'prom-client';
import type { Logger } from './logger.js';
import { metricsEnabled, registries } from './metrics/index.js';

export const uncaughtErrors = new Counter({
  name: 'agent_process_uncaught_errors_total',
  help:
    'Errors no handler caught (an unhandled error event or exception, an unawaited rejected promise), by kind and ' +
    'error class; logged at fatal with the stack. Any increase is a bug: a stream or promise without its handler.',
  labelNames: ['kind', 'error'] as const,
  registers: Object.values(registries),
});

export type UncaughtErrorPolicy = 'log' | 'exit';

let installed: { logger: Logger; policy: UncaughtErrorPolicy } | null = null;

/** The error's class name, bounded (a label value). */
function errorClass(err: unknown): string {
  if (err instanceof Error) return (err.constructor?.name || err.name || 'Error').slice(0, 40);
  return typeof err;
}

function describe(err: unknown): Record<string, unknown> {
  if (err instanceof Error) return { message: err.message, stack: err.stack, code: (err as { code?: unknown }).code, name: err.name };
  return { value: String(err) };
}

/** What the guard does with one error that reached the process (exported for tests). */
export function handleUncaught(kind: 'uncaught_exception' | 'unhandled_rejection', err: unknown): void {
  const target = installed;
  if (metricsEnabled()) uncaughtErrors.inc({ kind, error: errorClass(err) });
  const policy = target?.policy ?? 'log';
  const msg =
    policy === 'exit'
      ? `${kind}: no handler caught this error; exiting (UNCAUGHT_ERROR_POLICY=exit)`
      : `${kind}: no handler caught this error; the process keeps serving (a missing error handler: fix it)`;
  if (target) target.logger.fatal({ err: describe(err), kind }, msg);
  else console.error(msg, err);
  if (policy === 'exit') {
    // Let the log line out first; a second error meanwhile changes nothing.
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 100).unref();
  }
}

/**
 * Installs the guard (idempotent: the first call's logger and policy stay). Listeners are added, never replacing
 * others: a host that listens itself (vitest does, and reports such errors as failures) still sees every error.
 */
export function installProcessGuard(logger: Logger, policy: UncaughtErrorPolicy = 'log'): void {
  if (installed) return;
  installed = { logger, policy };
  process.on('uncaughtException', (err) => handleUncaught('uncaught_exception', err));
  process.on('unhandledRejection', (reason) => handleUncaught('unhandled_rejection', reason));
}
