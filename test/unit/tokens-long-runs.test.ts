/**
 * countTokens on text a client controls (core/domain/llm/tokens.ts): prose is counted exactly as the encoder counts
 * it whole; a long run without whitespace (or of whitespace) is estimated from a sample, never handed to the encoder
 * whole — encoded whole, 100,000 letters held the event loop for minutes (found by test/api/fuzz.test.ts).
 */
import { Tiktoken } from 'js-tiktoken/lite';
import o200kBase from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import { countTokens } from '../../core/domain/llm/tokens.js';

const exact = (t: string) => new Tiktoken(o200kBase).encode(t).length;

describe('countTokens', () => {
  it('counts prose, code and a long mixed text exactly', () => {
    const prose = Array.from({ length: 400 }, (_, i) => `Line ${i}: the quick brown fox, ${i * 7} times — déjà vu 漢字.\n`).join('');
    expect(countTokens(prose)).toBe(exact(prose));
    const code = 'function f(a, b) {\n  return a + b; // sum\n}\n'.repeat(50);
    expect(countTokens(code)).toBe(exact(code));
  });

  it('estimates a 100,000-character run from a sample, in proportion to its length', () => {
    const letters = 'a'.repeat(100_000);
    const sample = exact('a'.repeat(32));
    expect(countTokens(letters)).toBe(Math.ceil((sample * 100_000) / 32));
    // Text around the run is still counted exactly; the run adds its estimate.
    const mixed = `Hello there. ${'x'.repeat(10_000)} Bye now.`;
    const around = exact('Hello there. ') + exact(' Bye now.');
    expect(countTokens(mixed)).toBeGreaterThan(around);
    expect(countTokens(mixed)).toBeLessThan(around + 10_000);
    // Whitespace and emoji runs, without splitting a surrogate pair.
    expect(countTokens(' '.repeat(100_000))).toBeGreaterThan(0);
    expect(countTokens('😀'.repeat(50_000))).toBe(Math.ceil((exact('😀'.repeat(16)) * 100_000) / 32));
  });
});
