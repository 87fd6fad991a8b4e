/**
 * The raw-bytes depth check of core/platform/json-guard.ts against the nesting of the parsed value: brackets inside strings,
 * escaped quotes and runs of backslashes before a quote must not fool it (it skips strings with a native search for
 * the next quote and counts the backslashes in front of it).
 */
import { describe, expect, it } from 'vitest';
import { assertJsonDepth, JsonGuardError } from '../../core/platform/json-guard.js';

function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

const passes = (text: string, max: number) => {
  try {
    assertJsonDepth(Buffer.from(text), max);
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(JsonGuardError);
    return false;
  }
};

/** Deterministic pseudo-random generator (xorshift), so a failure reproduces. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
}

const NASTY = ['"', '\\', '\\\\', '\\"', '[', ']', '{', '}', '[[[', '}}', 'a', 'é', '\u0001', ' '];

function randomString(r: () => number): string {
  let s = '';
  const n = Math.floor(r() * 8);
  for (let i = 0; i < n; i++) s += NASTY[Math.floor(r() * NASTY.length)];
  return s;
}

function randomValue(r: () => number, depth: number): unknown {
  const k = r();
  if (depth > 12 || k < 0.3) return k < 0.15 ? randomString(r) : Math.floor(r() * 100);
  if (k < 0.65) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
  return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, () => [randomString(r), randomValue(r, depth + 1)]));
}

describe('assertJsonDepth', () => {
  it('ignores brackets and escaped quotes inside strings', () => {
    expect(passes(JSON.stringify({ a: '[[[[[[[[[[', b: '\\"{{{{{{' }), 2)).toBe(true);
    expect(passes(JSON.stringify({ a: 'x\\', b: [[[1]]] }), 3)).toBe(false);
    expect(passes(JSON.stringify({ a: 'x\\\\"', b: [[1]] }), 3)).toBe(true);
    expect(passes(JSON.stringify({ ['k"[[[']: { ['\\']: [] } }), 3)).toBe(true);
  });

  it('agrees with the depth of the parsed value on random documents full of quotes, backslashes and brackets', () => {
    const r = rng(20261201);
    for (let i = 0; i < 3000; i++) {
      const value = randomValue(r, 0);
      const text = JSON.stringify(value);
      const depth = depthOf(value);
      expect(passes(text, depth), text).toBe(true);
      if (depth > 0) expect(passes(text, depth - 1), text).toBe(false);
    }
  });
});
