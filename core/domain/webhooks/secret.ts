/** A webhook's signing secret at rest: AES-256-GCM with ENCRYPTION_KEY, as tenants' model credentials (core/domain/llm/credentials.ts). */
import { decryptJson, encryptJson, parseEncryptionKey } from '../llm/credentials.js';

export function encryptWebhookSecret(encryptionKey: string, secret: string): string {
  return encryptJson(parseEncryptionKey(encryptionKey), { secret });
}

export function decryptWebhookSecret(encryptionKey: string, stored: string): string {
  const value = decryptJson(parseEncryptionKey(encryptionKey), stored) as { secret?: unknown };
  if (typeof value?.secret !== 'string') throw new Error('stored webhook secret is malformed');
  return value.secret;
}
