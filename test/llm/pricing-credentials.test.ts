/** Price arithmetic and credential encryption, without a database. */
import crypto from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decryptJson, encryptJson, parseEncryptionKey } from '../../core/domain/llm/credentials.js';
import { formatDecimal, parseDecimal, priceFor, priceUsage } from '../../core/domain/llm/pricing.js';

describe('pricing', () => {
  it('prices demo tokens at 1 / 2 micro-USD per prompt / completion token', () => {
    const p = priceUsage({ prompt_tokens: 10, completion_tokens: 5 }, priceFor('demo', 'demo-chat'));
    expect(p.usage).toMatchObject({ prompt_price: '0.0000100', completion_price: '0.0000100', total_price: '0.0000200', total_tokens: 15 });
    expect(p.credits).toBe(20n);
  });

  it('rounds credits up so a tiny billed call still costs a credit', () => {
    const p = priceUsage({ prompt_tokens: 1, completion_tokens: 0 }, { input: '0.3', output: '0', currency: 'USD' });
    expect(p.usage.total_price).toBe('0.0000003');
    expect(p.credits).toBe(1n);
    expect(priceUsage({ prompt_tokens: 0, completion_tokens: 0 }, priceFor('demo', 'demo-chat')).credits).toBe(0n);
  });

  it('falls back to the provider wildcard price, then to free', () => {
    expect(priceFor('openai_compatible', 'anything').input).toBe('0.5');
    expect(priceFor('unknown', 'x')).toMatchObject({ input: '0', output: '0' });
  });

  it('decimal parse/format round-trips', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 20n }), (n) => parseDecimal(formatDecimal(n, 7), 7) === n));
  });
});

describe('credentials encryption', () => {
  const key = crypto.randomBytes(32);

  it('round-trips JSON and uses a fresh IV each time', () => {
    const a = encryptJson(key, { api_key: 'sk-1' });
    const b = encryptJson(key, { api_key: 'sk-1' });
    expect(a).not.toBe(b);
    expect(decryptJson(key, a)).toEqual({ api_key: 'sk-1' });
  });

  it('rejects another key and tampered ciphertext', () => {
    const stored = encryptJson(key, { api_key: 'sk-1' });
    expect(() => decryptJson(crypto.randomBytes(32), stored)).toThrow();
    const raw = Buffer.from(stored, 'base64');
    raw[raw.length - 1] ^= 1;
    expect(() => decryptJson(key, raw.toString('base64'))).toThrow();
  });

  it('accepts ENCRYPTION_KEY as 64 hex chars or base64 of 32 bytes, nothing else', () => {
    expect(parseEncryptionKey(key.toString('hex'))).toEqual(key);
    expect(parseEncryptionKey(key.toString('base64'))).toEqual(key);
    expect(() => parseEncryptionKey('short')).toThrow(/32 bytes/);
    expect(() => parseEncryptionKey(crypto.randomBytes(16).toString('hex'))).toThrow(/32 bytes/);
  });
});
