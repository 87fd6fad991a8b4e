/**
 * Header names an API tool's parameters may not set (issue 28): the ones that frame or route the request — a
 * `Host` parameter redirected the provider's key to another virtual host — and the header the provider's own auth
 * sets (`Authorization` for bearer, the api_key_header name). Refused when a document is imported (400) and again
 * when a tool is called (an error observation).
 */
import { FRAMING_HEADERS } from '../../platform/net/framing-headers.js';

/** Names reserved whatever the provider's auth (lowercase). */
export const RESERVED_HEADERS = FRAMING_HEADERS;

/** The header the provider's auth sets (lowercase), or null (none, or a query key). */
export function authHeaderOf(auth: unknown): string | null {
  const a = auth as { type?: string; name?: string } | null;
  if (a?.type === 'bearer') return 'authorization';
  if (a?.type === 'api_key_header' && a.name) return a.name.toLowerCase();
  return null;
}

/** Why a header parameter of this name is refused, or null. */
export function reservedHeaderProblem(name: string, authHeader: string | null): string | null {
  const n = name.toLowerCase();
  if (RESERVED_HEADERS.has(n)) return `the header parameter "${name}" is reserved (it frames or routes the request)`;
  if (authHeader && n === authHeader) return `the header parameter "${name}" is the one the provider's authentication sets`;
  return null;
}

/** The first header parameter of these tools that is refused under this auth, as `<tool>: <why>`, or null. */
export function headerParamProblem(
  tools: { name: string; operation?: { params: { name: string; in: string }[] } }[],
  auth: unknown,
): string | null {
  const authHeader = authHeaderOf(auth);
  for (const t of tools) {
    for (const p of t.operation?.params ?? []) {
      if (p.in !== 'header') continue;
      const problem = reservedHeaderProblem(p.name, authHeader);
      if (problem) return `${t.name}: ${problem}`;
    }
  }
  return null;
}

/** Whether a URL carries userinfo (`user:password@`), which would be stored and shown in clear. */
export function hasUserinfo(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  } catch {
    return false;
  }
}
