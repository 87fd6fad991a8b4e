/** Webhook signatures (core/domain/webhooks/signature.ts, docs/PROTOCOL.md "Scheduled turns and webhooks"): HMAC-SHA256 over `<t>.<body>`. */
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret, signatureHeader, verifySignature } from '../../core/domain/webhooks/signature.js';
import { decryptWebhookSecret, encryptWebhookSecret } from '../../core/domain/webhooks/secret.js';

const secret = 'whsec_test';
const body = '{"id":"e1","event":"turn.succeeded"}';
const now = 1_764_590_000;

describe('webhook signatures', () => {
  it('is t=<unix>,v1=<hex of HMAC-SHA256(secret, "<t>.<body>")>', () => {
    const mac = crypto.createHmac('sha256', secret).update(`${now}.${body}`).digest('hex');
    expect(signatureHeader(secret, body, now)).toBe(`t=${now},v1=${mac}`);
  });

  it('verifies its own header and refuses another body, secret, or a timestamp outside the tolerance', () => {
    const header = signatureHeader(secret, body, now);
    expect(verifySignature(secret, body, header, { now })).toBe(true);
    expect(verifySignature(secret, `${body} `, header, { now })).toBe(false);
    expect(verifySignature('whsec_other', body, header, { now })).toBe(false);
    expect(verifySignature(secret, body, header, { now: now + 301 })).toBe(false);
    expect(verifySignature(secret, body, 'v1=deadbeef', { now })).toBe(false);
  });

  it('keeps the secret encrypted at rest (AES-256-GCM with ENCRYPTION_KEY)', () => {
    const key = crypto.randomBytes(32).toString('hex');
    const s = newWebhookSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const stored = encryptWebhookSecret(key, s);
    expect(stored).not.toContain(s.slice(6));
    expect(decryptWebhookSecret(key, stored)).toBe(s);
    expect(() => decryptWebhookSecret(crypto.randomBytes(32).toString('hex'), stored)).toThrow();
  });
});
