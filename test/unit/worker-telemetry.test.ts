/**
 * What the worker adds for metrics and tracing (worker/telemetry.ts): with both off, no Temporal interceptor and no
 * sink, from sources and compiled alike. A compiled worker used to load the one prebuilt bundle holding the turn
 * metrics and OpenTelemetry workflow interceptors whatever the configuration, with sinks to drop what they reported;
 * it now loads the bundle of what is on (scripts/build.ts writes each; test/e2e/compiled-entrypoints.test.ts checks
 * their contents).
 */
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { PREBUILT_BUNDLES, prebuiltBundleFor, workerTelemetryOptions } from '../../worker/telemetry.js';

const tracing = { processor: new SimpleSpanProcessor(new InMemorySpanExporter()), resource: new Resource({ 'service.name': 't' }) };
const off = { metrics: false, tracing: null };

/** The option keys a worker gets: interceptor kinds, workflow modules (by file name), sink names. */
function shape(t: ReturnType<typeof workerTelemetryOptions>) {
  return {
    prebuiltBundle: t.prebuiltBundle ?? null,
    workflowModules: (t.interceptors?.workflowModules ?? []).map((m) => m.split('/').slice(-2).join('/')),
    activity: t.interceptors?.activity?.length ?? 0,
    sinks: Object.keys(t.sinks ?? {}).sort(),
  };
}

describe('worker telemetry options', () => {
  it('with metrics and tracing off: no interceptor and no sink, from sources and compiled', () => {
    expect(workerTelemetryOptions({ prebuiltBundle: false, on: off })).toEqual({});
    // Compiled: the bundle without interceptor modules, and nothing else.
    expect(workerTelemetryOptions({ prebuiltBundle: true, on: off })).toEqual({ prebuiltBundle: PREBUILT_BUNDLES.plain.file });
  });

  it('metrics on: the turn metrics module and its sink only (no OpenTelemetry span, no dropped-span sink)', () => {
    const metricsOnly = { metrics: true, tracing: null };
    expect(shape(workerTelemetryOptions({ prebuiltBundle: false, on: metricsOnly }))).toEqual({
      prebuiltBundle: null,
      workflowModules: [expect.stringMatching(/^workflows\/interceptors\.(ts|js)$/)],
      activity: 0,
      sinks: ['turnMetrics'],
    });
    expect(shape(workerTelemetryOptions({ prebuiltBundle: true, on: metricsOnly }))).toEqual({
      prebuiltBundle: PREBUILT_BUNDLES.metrics.file,
      workflowModules: [],
      activity: 0,
      sinks: ['turnMetrics'],
    });
  });

  it('tracing on: the OpenTelemetry workflow and activity interceptors with the exporter sink', () => {
    expect(shape(workerTelemetryOptions({ prebuiltBundle: false, on: { metrics: false, tracing } }))).toEqual({
      prebuiltBundle: null,
      workflowModules: ['lib/workflow-interceptors.js'],
      activity: 1,
      sinks: ['exporter'],
    });
    // The prebuilt bundle with tracing has the turn metrics module too: its sink is there (recording nothing while off).
    expect(shape(workerTelemetryOptions({ prebuiltBundle: true, on: { metrics: false, tracing } }))).toEqual({
      prebuiltBundle: PREBUILT_BUNDLES.full.file,
      workflowModules: [],
      activity: 1,
      sinks: ['exporter', 'turnMetrics'],
    });
  });

  it('every combination has a prebuilt bundle holding exactly what the options say it holds', () => {
    for (const metrics of [false, true])
      for (const traced of [false, true]) {
        const b = PREBUILT_BUNDLES[prebuiltBundleFor({ metrics, tracing: traced })];
        expect(b.tracing).toBe(traced);
        expect(b.metrics || !metrics).toBe(true);
        const fromSources = shape(
          workerTelemetryOptions({ prebuiltBundle: false, on: { metrics: b.metrics, tracing: b.tracing ? tracing : null } }),
        );
        const compiled = shape(workerTelemetryOptions({ prebuiltBundle: true, on: { metrics, tracing: traced ? tracing : null } }));
        // The bundle's modules are those a worker from sources would bundle for the same switches.
        expect({ ...compiled, workflowModules: fromSources.workflowModules, prebuiltBundle: null }).toEqual(fromSources);
      }
    expect(new Set(Object.values(PREBUILT_BUNDLES).map((b) => b.file)).size).toBe(3);
  });
});
