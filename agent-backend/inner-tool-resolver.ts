/**
 * The deployment's PluginToolResolver: provider tools are called by the api (`POST {apiUrl}/inner/api/tools/invoke`,
 * docs/PROTOCOL.md §3), which holds their credentials and makes the HTTP or MCP call. The backend forwards the run's
 * signed execution context and its run id, so the api can check the tool belongs to this run's config.
 * A call is not retried (tools are not idempotent); a failure is an observation for the model (modules/tools.ts).
 */
import { z } from 'zod';
import type { Logger } from '../core/platform/logger.js';
import { ToolErrorResult, ToolNotAvailableError, type PluginToolResolver } from './modules/types.js';

const InvokeToolResponse = z.object({ result: z.string(), is_error: z.boolean() });

export interface InnerToolResolverOptions {
  apiUrl: string;
  innerApiKey: string;
  /** TOOL_TIMEOUT_MS: the api's own limit; this side waits a little longer for its answer. */
  timeoutMs: number;
  fetch?: typeof fetch;
  logger?: Logger;
}

export function createInnerToolResolver(opts: InnerToolResolverOptions): PluginToolResolver {
  const doFetch = opts.fetch ?? fetch;
  const url = `${opts.apiUrl.replace(/\/+$/, '')}/inner/api/tools/invoke`;
  return {
    async invoke({ provider, name, args, context }) {
      if (!context.executionContext) throw new ToolNotAvailableError(`tool ${provider}/${name}: the run has no execution context`);
      const res = await doFetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-inner-api-key': opts.innerApiKey },
        body: JSON.stringify({ execution_context: context.executionContext, run_id: context.runId, provider, name, arguments: args }),
        signal: AbortSignal.any([context.signal, AbortSignal.timeout(opts.timeoutMs + 5_000)]),
      });
      const body: unknown = await res.json().catch(() => null);
      if (!res.ok) {
        const message = (body as { message?: unknown } | null)?.message;
        opts.logger?.warn({ provider, tool: name, status: res.status }, 'tool call refused by the api');
        throw new ToolErrorResult(
          `tool ${provider}/${name} could not be called: ${typeof message === 'string' ? message : `HTTP ${res.status}`}`,
        );
      }
      const out = InvokeToolResponse.parse(body);
      if (out.is_error) throw new ToolErrorResult(out.result);
      return out.result;
    },
  };
}
