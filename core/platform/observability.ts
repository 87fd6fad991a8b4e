/**
 * Metrics and tracing switched on or off from the configuration, once per process, by each composition root
 * (api/main.ts, worker.ts, agent-backend/main.ts, stack/start-stack.ts) before anything records or traces.
 */
import type { Config } from './config.js';
import { setMetricsEnabled } from './metrics/index.js';
import { initTracing } from './tracing/index.js';

export function setupObservability(
  config: Pick<Config, 'METRICS_ENABLED' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_SERVICE_NAME'>,
  role: string,
): void {
  setMetricsEnabled(config.METRICS_ENABLED);
  initTracing({ serviceName: config.OTEL_SERVICE_NAME ?? `dify-agent-${role}`, endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
}
