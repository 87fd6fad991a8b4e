/**
 * Tool providers of a tenant (table tool_providers, docs/tools.md): their auth settings, the secrets (AES-256-GCM
 * with ENCRYPTION_KEY, as model provider credentials: core/domain/llm/credentials.ts) and the cached tool list. Decrypted
 * secrets stay in the api process: never logged, never returned (views mask them), never sent to the agent backend.
 */
import { z } from 'zod';
import type { Db } from '../../platform/db.js';
import type { ToolProvider } from '../../generated/prisma/client.js';
import { decryptJson, encryptJson, parseEncryptionKey, type EncryptionKey } from '../llm/credentials.js';
import { unixSeconds } from '../../platform/time.js';
import { qualifiedToolName } from '../../protocol/tool-names.js';
import type { AgentSoulConfig } from '../soul.js';
import { ProviderTools, type ProviderTool } from './provider-tool.js';

export type ToolProviderKind = 'api' | 'mcp';

const Secret = z.string().min(1).max(8_192);
/** An HTTP header name (RFC 9110 token). */
export const HeaderName = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'not a valid HTTP header name');

/** How an API tool authenticates: the secret is written once and only ever shown masked. */
export const ApiAuthInput = z.discriminatedUnion('type', [
  z.object({ type: z.literal('none') }).strict(),
  z.object({ type: z.literal('api_key_header'), name: HeaderName, secret: Secret }).strict(),
  z.object({ type: z.literal('api_key_query'), name: z.string().min(1).max(100), secret: Secret }).strict(),
  z.object({ type: z.literal('bearer'), secret: Secret }).strict(),
]);
export type ApiAuthInput = z.infer<typeof ApiAuthInput>;

/** Header name → value sent to an MCP server (e.g. Authorization); values are secrets. */
export const McpHeadersInput = z.record(HeaderName, z.string().max(8_192)).refine((h) => Object.keys(h).length <= 20, 'at most 20 headers');

/** What tool_providers.auth holds (no secret). */
const StoredAuth = z.union([
  z.object({ type: z.enum(['none', 'api_key_header', 'api_key_query', 'bearer']), name: z.string().optional() }).strict(),
  z.object({ headers: z.array(z.string()) }).strict(),
]);
/** What tool_providers.encrypted_credentials decrypts to. */
const StoredSecrets = z.object({ secret: z.string().optional(), headers: z.record(z.string(), z.string()).optional() }).strict();
export type ProviderSecrets = z.infer<typeof StoredSecrets>;

const keyOf = (key: EncryptionKey) => (typeof key === 'string' ? parseEncryptionKey(key) : key);

/** auth + encrypted_credentials columns of an API provider. */
export function apiAuthColumns(key: EncryptionKey, auth: ApiAuthInput) {
  const stored = auth.type === 'none' ? { type: auth.type } : { type: auth.type, ...('name' in auth ? { name: auth.name } : {}) };
  return {
    auth: stored,
    encrypted_credentials: auth.type === 'none' ? null : encryptJson(keyOf(key), { secret: auth.secret } satisfies ProviderSecrets),
  };
}

/** auth + encrypted_credentials columns of an MCP provider. */
export function mcpAuthColumns(key: EncryptionKey, headers: Record<string, string>) {
  const names = Object.keys(headers);
  return {
    auth: { headers: names },
    encrypted_credentials: names.length ? encryptJson(keyOf(key), { headers } satisfies ProviderSecrets) : null,
  };
}

export class ProviderSecretsError extends Error {
  constructor(provider: string) {
    super(`the stored secret of tool provider ${provider} cannot be decrypted (wrong ENCRYPTION_KEY or corrupted row)`);
    this.name = 'ProviderSecretsError';
  }
}

export function secretsOf(key: EncryptionKey, row: Pick<ToolProvider, 'name' | 'encrypted_credentials'>): ProviderSecrets {
  if (!row.encrypted_credentials) return {};
  try {
    return StoredSecrets.parse(decryptJson(keyOf(key), row.encrypted_credentials));
  } catch {
    throw new ProviderSecretsError(row.name);
  }
}

export const toolsOf = (row: Pick<ToolProvider, 'tools'>): ProviderTool[] => ProviderTools.parse(row.tools);

/** A secret as the console shows it: never more than its last 4 characters, and only when it is long. */
export const maskSecret = (s: string): string => (s.length >= 16 ? `****${s.slice(-4)}` : '****');

/** A URL with its userinfo masked (rows stored before server URLs with `user:password@` were refused). */
export function withoutUserinfo(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '****';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** The console's view of a provider: secrets masked, tools with their model-facing names. */
export function providerView(key: EncryptionKey, row: ToolProvider) {
  const auth = StoredAuth.parse(row.auth);
  const secrets = secretsOf(key, row);
  const authView =
    'headers' in auth
      ? { headers: Object.fromEntries(auth.headers.map((h) => [h, maskSecret(secrets.headers?.[h] ?? '')])) }
      : { ...auth, ...(secrets.secret ? { secret: maskSecret(secrets.secret) } : {}) };
  return {
    id: row.id,
    name: row.name,
    kind: row.kind as ToolProviderKind,
    description: row.description,
    server_url: withoutUserinfo(row.server_url),
    auth: authView,
    tools: toolsOf(row).map((t) => ({
      name: t.name,
      model_name: qualifiedToolName(row.name, t.name),
      description: t.description,
      parameters: t.parameters,
    })),
    created_at: unixSeconds(row.created_at),
    updated_at: unixSeconds(row.updated_at),
  };
}

export function findProvider(db: Db, tenantId: string, name: string) {
  return db.toolProvider.findUnique({ where: { tenant_id_name: { tenant_id: tenantId, name } } });
}

/** The providers of these names in the tenant, by name (one query for a whole soul config). */
export async function providersByName(db: Db, tenantId: string, names: string[]): Promise<Map<string, ToolProvider>> {
  if (names.length === 0) return new Map();
  const rows = await db.toolProvider.findMany({ where: { tenant_id: tenantId, name: { in: [...new Set(names)] } } });
  return new Map(rows.map((r) => [r.name, r]));
}

/**
 * The soul's provider-tool refs with each tool's description and JSON schema from its provider's cached list (the
 * model is offered what the provider says now); `missing` names refs whose provider or tool is gone.
 */
export async function withProviderTools(
  db: Db,
  tenantId: string,
  soul: AgentSoulConfig,
): Promise<{ soul: AgentSoulConfig; missing: string[] }> {
  const providers = await providersByName(
    db,
    tenantId,
    soul.tools.plugin.map((r) => r.provider),
  );
  const missing: string[] = [];
  const plugin = soul.tools.plugin.map((ref) => {
    const row = providers.get(ref.provider);
    const tool = row ? toolsOf(row).find((t) => t.name === ref.name) : undefined;
    if (!tool) missing.push(qualifiedToolName(ref.provider, ref.name));
    return tool ? { ...ref, description: tool.description, parameters: tool.parameters } : ref;
  });
  return { soul: { ...soul, tools: { ...soul.tools, plugin } }, missing };
}
