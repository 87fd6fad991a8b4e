/**
 * What the worker adds to its options for metrics and tracing: the workflow interceptor modules bundled with the
 * workflow code (or the prebuilt bundle that holds them), the activity interceptors, and the sinks the workflow
 * interceptors report through. Nothing when both are off.
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

/**
 * The prebuilt bundles of the compiled build (scripts/build.ts writes each into dist/), by the workflow interceptor
 * modules they hold; a compiled worker loads the one for what is on. With metrics and tracing off that is the one
 * without any interceptor: a single bundle with both used to run the OpenTelemetry interceptors on every turn whatever
 * the configuration — a span around the workflow and each activity it schedules, its context serialised into every
 * activity's headers (so into history), and a sink call per span to drop it. Tracing takes the bundle with both (its
 * turn metrics sinks record nothing while metrics are off).
 */
export const PREBUILT_BUNDLES = {
  plain: { file: 'workflow-bundle-plain.js', metrics: false, tracing: false },
  metrics: { file: 'workflow-bundle-metrics.js', metrics: true, tracing: false },
  full: { file: 'workflow-bundle.js', metrics: true, tracing: true },
} as const;

export type PrebuiltBundle = keyof typeof PREBUILT_BUNDLES;

export function prebuiltBundleFor(on: { metrics: boolean; tracing: boolean }): PrebuiltBundle {
  return on.tracing ? 'full' : on.metrics ? 'metrics' : 'plain';
}

export interface WorkerTelemetry extends Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  /** A compiled worker's bundle, a file of dist/ (PREBUILT_BUNDLES). */
  prebuiltBundle?: string;
}

/**
 * From sources the worker bundles workflows/ itself, with the interceptor modules of what is on; compiled, it loads the
 * prebuilt bundle of what is on. Either way, with metrics and tracing off: no interceptor and no sink. `on`: what is on
 * (default: this process's metrics switch and tracing provider).
 */
export function workerTelemetryOptions(opts: {
  prebuiltBundle: boolean;
  on?: { metrics: boolean; tracing: ReturnType<typeof tracingInternals> };
}): WorkerTelemetry {
  const tracing = opts.on ? opts.on.tracing : tracingInternals();
  const metricsOn = opts.on ? opts.on.metrics : metricsEnabled();
  const bundle = opts.prebuiltBundle ? PREBUILT_BUNDLES[prebuiltBundleFor({ metrics: metricsOn, tracing: tracing !== null })] : null;
  // The turn metrics module is in the bundle: from sources when metrics are on, prebuilt whenever the bundle has it.
  const metrics = bundle ? bundle.metrics : metricsOn;
  const workflowModules = [...(metrics ? [TURN_METRICS_MODULE] : []), ...(tracing ? [OTEL_WORKFLOW_MODULE] : [])];
  const prebuilt = bundle ? { prebuiltBundle: bundle.file } : {};
  if (workflowModules.length === 0) return prebuilt;
  return {
    ...prebuilt,
    interceptors: {
      ...(bundle ? {} : { workflowModules }),
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
      ...(metrics ? turnMetricsSinks : {}),
      ...(tracing ? { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) } : {}),
    } as InjectedSinks<Sinks>,
  };
}
