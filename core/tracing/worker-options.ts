/**
 * What the worker adds to its options for metrics and tracing: the workflow interceptor modules bundled with the
 * workflow code, the activity interceptors, and the sinks the workflow interceptors report through. Nothing
 * when both are off.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { InjectedSinks, WorkerOptions } from '@temporalio/worker';
import { metricsEnabled, recordTurnEnded, recordTurnPaused } from '../metrics/index.js';
import type { TurnMetricsSinks } from '../metrics/workflow-interceptors.js';
import { tracingInternals } from './index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** Source or compiled: the module sits next to this one with this file's own extension. */
const TURN_METRICS_MODULE = path.join(here, '..', 'metrics', `workflow-interceptors${path.extname(fileURLToPath(import.meta.url))}`);
const OTEL_WORKFLOW_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

const turnMetricsSinks: InjectedSinks<TurnMetricsSinks> = {
  turnMetrics: {
    ended: { fn: (_info, outcome, code) => recordTurnEnded(outcome, code), callDuringReplay: false },
    paused: { fn: () => recordTurnPaused(), callDuringReplay: false },
  },
};

/**
 * `workflowModules` only matter when the worker bundles workflows/ itself (from sources); a prebuilt bundle
 * (scripts/build.ts) has its interceptors already, and the sinks are injected either way (a sink the bundle
 * does not call costs nothing).
 */
export function workerTelemetryOptions(opts: { prebuiltBundle: boolean }): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const tracing = tracingInternals();
  const workflowModules = [...(metricsEnabled() ? [TURN_METRICS_MODULE] : []), ...(tracing ? [OTEL_WORKFLOW_MODULE] : [])];
  if (workflowModules.length === 0) return {};
  return {
    interceptors: {
      ...(opts.prebuiltBundle ? {} : { workflowModules }),
      ...(tracing
        ? {
            activity: [
              (ctx) => ({
                inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
                outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
              }),
            ],
          }
        : {}),
    },
    sinks: {
      ...(metricsEnabled() ? turnMetricsSinks : {}),
      ...(tracing ? { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) } : {}),
    },
  };
}
