/**
 * Per-run agent stub tokens. A token names its run and carries an HMAC over the run id, so any
 * replica can verify it without shared state; it is honoured only while the run is running and its
 * composition has a `config` layer. The sandbox receives it as DIFY_AGENT_STUB_TOKEN.
 */
import crypto from 'node:crypto';

const PREFIX = 'dast_';

function mac(secret: string, runId: string): string {
  return crypto.createHmac('sha256', secret).update(`agent-stub:v1:${runId}`).digest('base64url');
}

export function mintStubToken(secret: string, runId: string): string {
  return `${PREFIX}${runId}.${mac(secret, runId)}`;
}

/** The run id the token was minted for, or null when the token is malformed or forged. */
export function verifyStubToken(secret: string, token: string): string | null {
  if (!token.startsWith(PREFIX)) return null;
  const dot = token.lastIndexOf('.');
  if (dot <= PREFIX.length) return null;
  const runId = token.slice(PREFIX.length, dot);
  const given = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(mac(secret, runId));
  return given.length === expected.length && crypto.timingSafeEqual(given, expected) ? runId : null;
}
