/**
 * The Temporal SDK's own worker metrics (task slots, poll latencies, schedule-to-start, activity retries, sticky
 * cache…). The SDK's Runtime exports them with its Prometheus exporter on a loopback port of its own; the
 * worker's `/metrics` appends that text, so an operator scrapes one endpoint per process.
 */
import net from 'node:net';
import type { TelemetryOptions } from '@temporalio/worker';
import { metricsEnabled } from './index.js';

let exporterAddress: string | null = null;

/** A free loopback port for the SDK's exporter (the Runtime needs a fixed address; it is installed once per process). */
export async function pickTemporalMetricsAddress(): Promise<string | null> {
  if (!metricsEnabled()) return null;
  const port = await new Promise<number>((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  return `127.0.0.1:${port}`;
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
