/**
 * The frame of every fault test file: one process stack per file; before each test every part is brought
 * back up (a failed test may have left one down); after each test the audit runs over what that test
 * created, with the streams its clients received.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { assertAuditClean } from './audit.js';
import type { TurnStream } from './client.js';
import { FaultStack, step, type FaultStackOptions } from './harness.js';
import { recordRecovery } from './summary.js';

export interface FaultContext {
  stack: FaultStack;
  /** Keeps a client stream for the audit's "stream == stored log". */
  track: (s: TurnStream) => TurnStream;
  /** Prints a measured recovery time (it goes into docs/failure-modes.md's table). */
  recovery: (what: string, ms: number) => void;
}

export function useFaultStack(name: string, opts: FaultStackOptions = {}): FaultContext {
  const ctx = {} as FaultContext;
  let streams: TurnStream[] = [];
  let since = new Date();
  ctx.track = (s) => {
    streams.push(s);
    return s;
  };
  ctx.recovery = (what, ms) => {
    process.stderr.write(`[recovery] ${name}: ${what}: ${(ms / 1000).toFixed(2)} s\n`);
    // The suite prints every one at its end (summary.ts).
    recordRecovery(name, what, ms);
  };
  beforeAll(async () => {
    ctx.stack = await FaultStack.start(name, opts);
  }, 240_000);
  afterAll(async () => {
    await ctx.stack?.stop();
  }, 60_000);
  beforeEach(async () => {
    await ctx.stack.heal();
    // Row timestamps come from PostgreSQL's clock, which is this machine's.
    since = new Date(Date.now() - 200);
    streams = [];
  }, 180_000);
  afterEach(async () => {
    await ctx.stack.heal();
    step(`${name}: audit`);
    const input = {
      databaseUrl: ctx.stack.databaseUrl,
      withTemporal: <T>(fn: (c: Client) => Promise<T>) => ctx.stack.withTemporal(fn),
      taskQueue: ctx.stack.taskQueue,
      since,
      streams: streams.map((s) => ({ frames: s.frames })),
    };
    await assertAuditClean(input);
  }, 180_000);
  return ctx;
}
