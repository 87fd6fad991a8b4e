/**
 * One call of a provider tool, made by the api (docs/tools.md): an API tool becomes one HTTP request built from its
 * OpenAPI operation, an MCP tool one `tools/call`. Both go through the guarded fetch (SSRF check in the connection's
 * lookup), under TOOL_TIMEOUT_MS, and keep at most TOOL_MAX_RESPONSE_BYTES of the answer (cut with a marker).
 * Whatever goes wrong — bad arguments, a refused address, a timeout, a non-2xx answer — is an observation the model
 * reads (`isError`), never a run failure; the provider's secret is scrubbed from every message.
 */
import type { ToolProvider } from '../../generated/prisma/client.js';
import type { EncryptionKey } from '../llm/credentials.js';
import { AddressRefusedError, readCapped, type FetchLike } from '../../platform/net/ssrf.js';
import { callMcpTool } from './mcp.js';
import type { ApiOperation } from './provider-tool.js';
import { secretsOf, toolsOf, type ProviderSecrets } from './providers.js';
import { authHeaderOf, reservedHeaderProblem } from './reserved-headers.js';
import { scrubSecrets, secretForms, secretParts } from './secret-forms.js';

export interface ToolCallDeps {
  fetch: FetchLike;
  encryptionKey: EncryptionKey;
  timeoutMs: number;
  maxResponseBytes: number;
}

export interface ToolCallResult {
  /** The observation for the model. */
  result: string;
  isError: boolean;
  /** The API's HTTP status (API tools that got an answer). */
  status?: number;
}

class ToolArgsError extends Error {}

const truncationMarker = (maxBytes: number) => `\n[response truncated: it was longer than ${maxBytes} bytes]`;

export async function callProviderTool(
  deps: ToolCallDeps,
  provider: ToolProvider,
  toolName: string,
  args: unknown,
  signal?: AbortSignal,
): Promise<ToolCallResult> {
  const tool = toolsOf(provider).find((t) => t.name === toolName);
  if (!tool) return { result: `the tool provider ${provider.name} has no tool ${toolName} (any more)`, isError: true };
  if (typeof args !== 'object' || args === null || Array.isArray(args))
    return { result: 'the tool arguments must be a JSON object', isError: true };
  const secrets = secretsOf(deps.encryptionKey, provider);
  const timeout = AbortSignal.timeout(deps.timeoutMs);
  const combined = signal ? AbortSignal.any([timeout, signal]) : timeout;
  try {
    if (provider.kind === 'mcp') {
      const server = { url: provider.server_url, headers: secrets.headers ?? {} };
      const r = await callMcpTool(server, tool.name, args as Record<string, unknown>, {
        fetch: deps.fetch,
        timeoutMs: deps.timeoutMs,
        signal: combined,
      });
      const capped = capText(r.text, deps.maxResponseBytes);
      return { result: scrub(capped, secrets), isError: r.isError };
    }
    if (!tool.operation) return { result: `the tool ${toolName} has no HTTP operation`, isError: true };
    return await callApi(deps, provider, tool.operation, args as Record<string, unknown>, secrets, combined);
  } catch (err) {
    return { result: scrub(failureMessage(err, timeout, deps.timeoutMs), secrets), isError: true };
  }
}

async function callApi(
  deps: ToolCallDeps,
  provider: ToolProvider,
  op: ApiOperation,
  args: Record<string, unknown>,
  secrets: ProviderSecrets,
  signal: AbortSignal,
): Promise<ToolCallResult> {
  const { url, init } = buildRequest(provider, op, args, secrets);
  const res = await deps.fetch(url, { ...init, signal });
  const { text, truncated } = await readCapped(res, deps.maxResponseBytes);
  const body = scrub(truncated ? text + truncationMarker(deps.maxResponseBytes) : text, secrets);
  if (res.status >= 200 && res.status < 300) return { result: body, isError: false, status: res.status };
  return { result: `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}: ${body}`, isError: true, status: res.status };
}

/** The HTTP request of one API tool call: path, query, header and body arguments, and the provider's auth. */
export function buildRequest(
  provider: Pick<ToolProvider, 'server_url' | 'auth'>,
  op: ApiOperation,
  args: Record<string, unknown>,
  secrets: ProviderSecrets,
): { url: URL; init: RequestInit } {
  let path = op.path;
  for (const p of op.params.filter((x) => x.in === 'path')) {
    const v = args[p.name];
    if (v === undefined || v === null || v === '') throw new ToolArgsError(`the argument ${p.name} is required`);
    const text = scalar(v);
    // `.`/`..` (also percent-encoded, %2e%2e, or as a segment of a/../b) would leave the operation's path with the
    // provider's key (issue 28): the URL parser resolves dot segments after encodeURIComponent left them as they were.
    if (hasDotSegment(text)) throw new ToolArgsError(`the argument ${p.name} may not be "." or ".." (a path outside the operation)`);
    path = path.split(`{${p.name}}`).join(encodeURIComponent(text));
  }
  const base = new URL(provider.server_url);
  const url = new URL(provider.server_url.replace(/\/+$/, '') + path);
  const basePath = base.pathname.replace(/\/+$/, '');
  if (url.origin !== base.origin || (basePath && url.pathname !== basePath && !url.pathname.startsWith(`${basePath}/`)))
    throw new ToolArgsError("the arguments lead outside the provider's server URL");
  const headers: Record<string, string> = { accept: 'application/json, text/plain;q=0.9, */*;q=0.5', 'user-agent': 'dify-agent-tools' };
  const authHeader = authHeaderOf(provider.auth);
  for (const p of op.params) {
    const v = args[p.name];
    if (v === undefined || v === null) continue;
    if (p.in === 'query') for (const item of Array.isArray(v) ? v : [v]) url.searchParams.append(p.name, scalar(item));
    if (p.in === 'header') {
      // Checked again at call time: a document stored before the import check, or auth changed since.
      const problem = reservedHeaderProblem(p.name, authHeader);
      if (problem) throw new ToolArgsError(problem);
      headers[p.name.toLowerCase()] = scalar(v);
    }
  }
  let body: string | undefined;
  if (op.body === 'flat') {
    const fields = op.params.filter((p) => p.in === 'body' && args[p.name] !== undefined).map((p) => [p.name, args[p.name]]);
    body = JSON.stringify(Object.fromEntries(fields));
  } else if (op.body === 'whole' && args.body !== undefined) body = JSON.stringify(args.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const auth = provider.auth as { type?: string; name?: string };
  if (secrets.secret) {
    if (auth.type === 'api_key_header' && auth.name) headers[auth.name.toLowerCase()] = secrets.secret;
    if (auth.type === 'api_key_query' && auth.name) url.searchParams.set(auth.name, secrets.secret);
    if (auth.type === 'bearer') headers.authorization = `Bearer ${secrets.secret}`;
  }
  return { url, init: { method: op.method.toUpperCase(), headers, body } };
}

/** Whether the text, percent-decoded up to 3 times, is or contains a `.`/`..` path segment. */
function hasDotSegment(text: string): boolean {
  let t = text;
  for (let i = 0; i < 4; i++) {
    if (/(^|[/\\])\.{1,2}([/\\]|$)/.test(t)) return true;
    let next: string;
    try {
      next = decodeURIComponent(t);
    } catch {
      next = t.replace(/%2e/gi, '.').replace(/%2f/gi, '/').replace(/%5c/gi, '\\');
    }
    if (next === t) return false;
    t = next;
  }
  return true; // still encoded after 3 rounds: refuse rather than guess
}

const scalar = (v: unknown): string => (typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v));

function capText(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= maxBytes ? text : bytes.subarray(0, maxBytes).toString('utf8') + truncationMarker(maxBytes);
}

function failureMessage(err: unknown, timeout: AbortSignal, timeoutMs: number): string {
  if (timeout.aborted) return `the tool call took longer than ${timeoutMs} ms and was abandoned`;
  if (err instanceof ToolArgsError) return `invalid arguments: ${err.message}`;
  if (err instanceof AddressRefusedError) return `the tool server cannot be reached: ${err.message}`;
  const e = err as { message?: string; code?: string; cause?: { code?: string; message?: string } };
  return `the tool call failed: ${e.cause?.message ?? e.message ?? String(err)}`;
}

/** No secret in what the model (and the thought rows) see, whatever an error message or server echoes, in any form. */
function scrub(text: string, secrets: ProviderSecrets): string {
  const values = [secrets.secret, ...Object.values(secrets.headers ?? {})];
  return scrubSecrets(text, secretForms(values), secretParts(values));
}
