/**
 * Tenant model-provider credentials, AES-256-GCM encrypted at rest. The stored value is
 * base64(iv[12] | tag[16] | ciphertext). Decrypted objects stay inside the api process: never
 * logged, never returned by an API, never sent to the agent backend.
 */
import crypto from 'node:crypto';
import type { PrismaClient } from '../../generated/prisma/client.js';
import type { ProviderCredentials } from './provider.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;

export class CredentialsDecryptError extends Error {
  constructor(provider: string) {
    // No ciphertext, no key material in the message.
    super(`stored credentials for provider ${provider} cannot be decrypted (wrong ENCRYPTION_KEY or corrupted row)`);
    this.name = 'CredentialsDecryptError';
  }
}

/** ENCRYPTION_KEY as 32 bytes: 64 hex chars or base64 of 32 bytes. */
export function parseEncryptionKey(value: string): Buffer {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64}$/.test(v)) return Buffer.from(v, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(v)) {
    const b = Buffer.from(v, 'base64');
    if (b.length === 32) return b;
  }
  throw new Error('ENCRYPTION_KEY must be 32 bytes, given as 64 hex characters or base64');
}

export function encryptJson(key: Buffer, value: unknown): string {
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64');
}

/** Throws when the key is wrong or the value was tampered with (GCM authentication). */
export function decryptJson(key: Buffer, stored: string): unknown {
  const raw = Buffer.from(stored, 'base64');
  if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('ciphertext too short');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  return JSON.parse(plain.toString('utf8'));
}

type Db = Pick<PrismaClient, 'modelProviderCredential'>;
/** The parsed key, or ENCRYPTION_KEY as configured. */
export type EncryptionKey = Buffer | string;

const keyOf = (key: EncryptionKey) => (typeof key === 'string' ? parseEncryptionKey(key) : key);

let afterWrite: ((tenantId: string, provider: string) => void) | null = null;

/**
 * Called after each write below. The process's gateway cache (gateway-cache.ts) drops the entry at once here, so
 * this process's next read sees its own write even before the NOTIFY of the write has come back.
 */
export function onCredentialsWritten(fn: ((tenantId: string, provider: string) => void) | null): void {
  afterWrite = fn;
}

/** Create or replace the tenant's credentials for a provider. */
export async function saveCredentials(
  db: Db,
  key: EncryptionKey,
  tenantId: string,
  provider: string,
  credentials: ProviderCredentials,
): Promise<void> {
  const encrypted_config = encryptJson(keyOf(key), credentials);
  await db.modelProviderCredential.upsert({
    where: { tenant_id_provider: { tenant_id: tenantId, provider } },
    create: { tenant_id: tenantId, provider, encrypted_config },
    update: { encrypted_config },
  });
  afterWrite?.(tenantId, provider);
}

/** Delete the tenant's credentials for a provider; how many rows went (0 or 1). */
export async function deleteCredentials(db: Db, tenantId: string, provider: string): Promise<number> {
  const { count } = await db.modelProviderCredential.deleteMany({ where: { tenant_id: tenantId, provider } });
  afterWrite?.(tenantId, provider);
  return count;
}

/** The tenant's decrypted credentials for a provider, or null when it has none (system-hosted). */
export async function loadCredentials(db: Db, key: EncryptionKey, tenantId: string, provider: string): Promise<ProviderCredentials | null> {
  const row = await db.modelProviderCredential.findUnique({
    where: { tenant_id_provider: { tenant_id: tenantId, provider } },
    select: { encrypted_config: true },
  });
  return row ? openCredentials(key, provider, row.encrypted_config) : null;
}

/** A stored `encrypted_config` of `provider` decrypted (CredentialsDecryptError when it cannot be). */
export function openCredentials(key: EncryptionKey, provider: string, encryptedConfig: string): ProviderCredentials {
  let value: unknown;
  try {
    value = decryptJson(keyOf(key), encryptedConfig);
  } catch {
    throw new CredentialsDecryptError(provider);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new CredentialsDecryptError(provider);
  return value as ProviderCredentials;
}
