/**
 * Webhook signatures (docs/PROTOCOL.md "Scheduled turns and webhooks"): `Dify-Signature: t=<unix seconds>,v1=<hex>` where v1 is
 * HMAC-SHA256 over `<t>.<body>` with the webhook's secret — Stripe's scheme, so receivers know it, and the timestamp
 * inside the MAC lets them refuse replays older than a tolerance they choose.
 */
import crypto from 'node:crypto';

export const SIGNATURE_HEADER = 'Dify-Signature';

export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const mac = crypto.createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** The receiver's check (the one PROTOCOL.md shows): true when a v1 matches and t is within `toleranceS` of now. */
export function verifySignature(secret: string, body: string, header: string, opts: { toleranceS?: number; now?: number } = {}): boolean {
  const parts = header.split(',').map((p) => p.trim().split('='));
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t)) return false;
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (opts.toleranceS ?? 300)) return false;
  const expected = Buffer.from(crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex'));
  return parts
    .filter(([k]) => k === 'v1')
    .some(([, v]) => v !== undefined && v.length === expected.length && crypto.timingSafeEqual(Buffer.from(v), expected));
}

/** A new secret: `whsec_` + 32 random bytes (base64url). */
export function newWebhookSecret(): string {
  return `whsec_${crypto.randomBytes(32).toString('base64url')}`;
}
