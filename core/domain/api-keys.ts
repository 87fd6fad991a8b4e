/** App API keys: shown once at creation, stored only as SHA-256. */
import crypto from 'node:crypto';

export function generateAppApiKey(): { key: string; hash: string; prefix: string } {
  const key = `app-${crypto.randomBytes(24).toString('base64url')}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, 8) };
}

export function hashApiKey(key: string): string {
  return crypto.createHash('sha256').update(key).digest('hex');
}
