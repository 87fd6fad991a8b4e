/**
 * The one port allocator (core/platform/ports.ts) and the SDK exporter's address it now gives: every port is outside
 * the kernel's ephemeral range, where no `listen(0)` or outbound socket of any process can be handed it, and none is
 * handed out twice in a process. A CI run failed when the Temporal Runtime, re-created in a shared vitest process from
 * its remembered options, rebound an exporter port picked by `listen(0)` ("Address already in use").
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../core/platform/ports.js';
import { pickTemporalMetricsAddress } from '../../core/platform/metrics/temporal.js';

function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return [lo!, hi!];
  } catch {
    return [32768, 60999];
  }
}

describe('ports outside the ephemeral range', () => {
  it("the SDK exporter's address and every free port are outside it, and never the same twice", async () => {
    const [lo, hi] = ephemeralRange();
    const ports = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const address = await pickTemporalMetricsAddress();
      expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
      ports.add(Number(address!.split(':')[1]));
      ports.add(await freePort());
    }
    expect(ports.size).toBe(40);
    for (const p of ports) expect(p < lo || p > hi, `port ${p} inside ${lo}-${hi}`).toBe(true);
  });
});
