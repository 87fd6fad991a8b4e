/**
 * MCP tools (issue 14 §4) through the official TypeScript SDK's client over streamable HTTP. Each listing and each
 * call is its own short session (connect, initialize, one request, close): nothing lives between tool calls, so any
 * api replica can make any call, at the price of one initialize round trip per call. The transport's fetch is the
 * guarded one (core/platform/net/ssrf.ts): the SSRF check runs in the connection's own lookup.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolName, qualifiedNameProblem } from '../../protocol/tool-names.js';
import type { FetchLike } from '../../platform/net/ssrf.js';
import type { ProviderTool } from './provider-tool.js';

export interface McpServer {
  url: string;
  headers: Record<string, string>;
}

export interface McpOptions {
  fetch: FetchLike;
  timeoutMs: number;
  signal?: AbortSignal;
}

const MAX_DESCRIPTION = 1_000;

async function withClient<T>(
  server: McpServer,
  opts: McpOptions,
  fn: (c: Client, request: { timeout: number; signal?: AbortSignal }) => Promise<T>,
) {
  const client = new Client({ name: 'dify-agent-temporal', version: '0.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    fetch: opts.fetch,
    requestInit: { headers: server.headers },
  });
  const request = { timeout: opts.timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) };
  try {
    await client.connect(transport, request);
    return await fn(client, request);
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** The server's tools usable under this provider's prefix, and those left out (with why). */
export async function listMcpTools(
  server: McpServer,
  provider: string,
  opts: McpOptions,
): Promise<{ tools: ProviderTool[]; skipped: { tool: string; reason: string }[] }> {
  const listed = await withClient(server, opts, async (c, request) => {
    const all = [];
    let cursor: string | undefined;
    do {
      const page = await c.listTools(cursor ? { cursor } : {}, request);
      all.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && all.length < 1_000);
    return all;
  });
  const tools: ProviderTool[] = [];
  const skipped: { tool: string; reason: string }[] = [];
  for (const t of listed) {
    const valid = ToolName.safeParse(t.name);
    const problem = valid.success ? qualifiedNameProblem(provider, t.name) : valid.error.issues[0]!.message;
    if (problem) skipped.push({ tool: t.name, reason: problem });
    else
      tools.push({
        name: t.name,
        description: (t.description ?? t.title ?? t.name).slice(0, MAX_DESCRIPTION),
        parameters: t.inputSchema as Record<string, unknown>,
      });
  }
  return { tools, skipped };
}

/** One tool call: its text content (the observation) and whether the server flagged it as an error. */
export async function callMcpTool(server: McpServer, name: string, args: Record<string, unknown>, opts: McpOptions) {
  const result = await withClient(server, opts, (c, request) => c.callTool({ name, arguments: args }, undefined, request));
  return { text: observationOf(result), isError: result.isError === true };
}

/** Text parts as they are; other parts named (an image is no use to a text observation); structured content as JSON. */
function observationOf(result: Awaited<ReturnType<Client['callTool']>>): string {
  const content = Array.isArray(result.content) ? (result.content as { type: string; text?: string; mimeType?: string }[]) : [];
  const parts = content.map((p) => {
    if (p.type === 'text') return p.text ?? '';
    if (p.type === 'resource') {
      const r = (p as { resource?: { text?: string; uri?: string } }).resource;
      return r?.text ?? `[resource ${r?.uri ?? ''}]`;
    }
    return `[${p.type}${p.mimeType ? ` ${p.mimeType}` : ''}]`;
  });
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  if (parts.length === 0 && 'toolResult' in result) return JSON.stringify(result.toolResult);
  return parts.join('\n');
}
