/**
 * The Temporal SDK's own worker metrics (task slots, poll latencies, schedule-to-start, activity retries, sticky
 * cache…). The SDK's Runtime exports them with its Prometheus exporter on a loopback port of its own; the
 * worker's `/metrics` appends that text, so an operator scrapes one endpoint per process.
 */
import type { TelemetryOptions } from '@temporalio/worker';
import { metricsEnabled } from './index.js';
import { stablePort } from '../ports.js';

let exporterAddress: string | null = null;

/**
 * A free loopback port for the SDK's exporter, outside the kernel's ephemeral range (core/platform/ports.ts). The
 * Runtime needs a fixed address, and it rebinds that address whenever it is created again from its remembered options
 * (a process where stacks come and go, as npm test's shared vitest processes do). A `listen(0)` port could by then
 * belong to any outbound socket of the process, and a CI run failed that way ("Failed to start prometheus metrics
 * exporter: Address already in use").
 */
export async function pickTemporalMetricsAddress(): Promise<string | null> {
  if (!metricsEnabled()) return null;
  return `127.0.0.1:${await stablePort()}`;
}

/** Runtime.install's telemetryOptions for that address (seconds, like every other histogram here). */
export function temporalTelemetryOptions(address: string | null | undefined): TelemetryOptions | undefined {
  if (!address) return undefined;
  exporterAddress = address;
  return { metrics: { prometheus: { bindAddress: address, useSecondsForDurations: true } } };
}

/** The SDK's exposition text ('' when it is not exported from this process or cannot be read right now). */
export async function temporalMetricsText(): Promise<string> {
  if (!exporterAddress) return '';
  const res = await fetch(`http://${exporterAddress}/metrics`, { signal: AbortSignal.timeout(2000) });
  return res.ok ? res.text() : '';
}
