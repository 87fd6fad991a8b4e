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
import type { Sinks } from '@temporalio/workflow';
import { metricsEnabled, recordTurnEnded, recordTurnPaused } from '../core/platform/metrics/index.js';
import type { TurnMetricsSinks } from '../workflows/interceptors.js';
import { tracingInternals } from '../core/platform/tracing/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** Source or compiled: the module sits next to this one with this file's own extension. */
const TURN_METRICS_MODULE = path.join(here, '..', 'workflows', `interceptors${path.extname(fileURLToPath(import.meta.url))}`);
const OTEL_WORKFLOW_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

const turnMetricsSinks: InjectedSinks<TurnMetricsSinks> = {
  turnMetrics: {
    ended: { fn: (_info, outcome, code) => recordTurnEnded(outcome, code), callDuringReplay: false },
    paused: { fn: () => recordTurnPaused(), callDuringReplay: false },
  },
};

/** With tracing off, workflow spans of a prebuilt bundle (which always has the OpenTelemetry interceptors) are dropped here. */
const droppedWorkflowSpans = { exporter: { export: { fn: () => undefined, callDuringReplay: false } } };

/**
 * From sources the worker bundles workflows/ itself, with the interceptor modules of what is on. A prebuilt bundle
 * (scripts/build.ts) has both modules already, whatever the configuration: their sinks are always injected then,
 * recording nothing while metrics or tracing is off.
 */
export function workerTelemetryOptions(opts: { prebuiltBundle: boolean }): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const tracing = tracingInternals();
  const metrics = metricsEnabled() || opts.prebuiltBundle;
  const workflowModules = [...(metrics ? [TURN_METRICS_MODULE] : []), ...(tracing ? [OTEL_WORKFLOW_MODULE] : [])];
  if (workflowModules.length === 0 && !opts.prebuiltBundle) return {};
  const exporterSink = tracing
    ? { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) }
    : opts.prebuiltBundle
      ? droppedWorkflowSpans
      : {};
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
    sinks: { ...(metrics ? turnMetricsSinks : {}), ...exporterSink } as InjectedSinks<Sinks>,
  };
}
