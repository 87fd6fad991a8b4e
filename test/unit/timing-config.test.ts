/**
 * The run lease's and the turn sweeper's timings as settings (core/platform/config.ts, issue 30): documented defaults, bounds,
 * and the refine that keeps the lease's TTL at least 3 renewals long.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/platform/config.js';
import { sweeperTimings } from '../../worker/sweeper.js';

describe('run lease and turn sweeper settings', () => {
  it('default to the values issue 30 chose', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      AGENT_RUN_LEASE_RENEW_MS: 1_000,
      AGENT_RUN_LEASE_TTL_MS: 5_000,
      AGENT_RUN_REAP_INTERVAL_MS: 1_000,
      TURN_SWEEP_INTERVAL_MS: 5_000,
      TURN_SWEEP_MIN_AGE_MS: 20_000,
      TURN_SWEEP_BATCH: 100,
      MODEL_INPUT_RETENTION_DAYS: 30,
    });
    expect(sweeperTimings(c)).toEqual({ everyMs: 5_000, graceMs: 20_000, batch: 100, modelInputRetentionDays: 30 });
  });

  it('are read from the environment', () => {
    const c = loadConfig({
      AGENT_RUN_LEASE_RENEW_MS: '200',
      AGENT_RUN_LEASE_TTL_MS: '600',
      AGENT_RUN_REAP_INTERVAL_MS: '200',
      TURN_SWEEP_BATCH: '7',
    });
    expect([c.AGENT_RUN_LEASE_RENEW_MS, c.AGENT_RUN_LEASE_TTL_MS, c.TURN_SWEEP_BATCH]).toEqual([200, 600, 7]);
  });

  it('refuse a lease TTL under 3× the renewal interval, saying so', () => {
    expect(() => loadConfig({ AGENT_RUN_LEASE_RENEW_MS: '2000', AGENT_RUN_LEASE_TTL_MS: '5000' })).toThrow(
      /AGENT_RUN_LEASE_TTL_MS: must be at least 3× AGENT_RUN_LEASE_RENEW_MS \(6000\)/,
    );
    const short = { AGENT_RUN_LEASE_RENEW_MS: 100, AGENT_RUN_REAP_INTERVAL_MS: 100 };
    expect(() => loadConfig({}, { ...short, AGENT_RUN_LEASE_TTL_MS: 299 })).toThrow(/AGENT_RUN_LEASE_TTL_MS: must be at least 3×/);
    expect(loadConfig({}, { ...short, AGENT_RUN_LEASE_TTL_MS: 300 }).AGENT_RUN_LEASE_TTL_MS).toBe(300);
  });

  it('refuse a reaper slower than the lease, a sweep age inside a turn start, and an empty batch', () => {
    expect(() => loadConfig({ AGENT_RUN_REAP_INTERVAL_MS: '6000' })).toThrow(
      /AGENT_RUN_REAP_INTERVAL_MS: must be at most AGENT_RUN_LEASE_TTL_MS \(5000\)/,
    );
    expect(() => loadConfig({ TURN_SWEEP_MIN_AGE_MS: '10000' })).toThrow(/TURN_SWEEP_MIN_AGE_MS: must be at least 15000/);
    expect(() => loadConfig({ TURN_SWEEP_BATCH: '0' })).toThrow(/TURN_SWEEP_BATCH/);
    expect(() => loadConfig({ TURN_SWEEP_INTERVAL_MS: 'soon' })).toThrow(/TURN_SWEEP_INTERVAL_MS/);
  });
});
