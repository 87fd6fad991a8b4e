/**
 * Before a run's runtime layer enters, the api confirms the run may use the workspace it names (issue 27):
 * `POST {apiUrl}/inner/api/agent/execution-context/verify` with the inner API key, the run's signed execution
 * context, the runtime layer's workspace id and the run id. The backend cannot decide this itself: it does not hold
 * EXECUTION_CONTEXT_SIGNING_KEY (it must not be able to mint a context). One round trip per run with a runtime layer.
 */
import { RunRefusedError } from './errors.js';
import type { ExecutionContextLayerConfig } from '../core/protocol/run.js';

export interface WorkspaceAuthorizer {
  authorize(req: {
    executionContext: ExecutionContextLayerConfig | null;
    workspaceId: string;
    runId: string;
    signal?: AbortSignal;
  }): Promise<void>;
}

export const WORKSPACE_NOT_AUTHORIZED = 'workspace_not_authorized';
const TIMEOUT_MS = 15_000;
const ATTEMPTS = 3;

export function createWorkspaceAuthorizer(opts: { apiUrl: string; innerApiKey: string; fetch?: typeof fetch }): WorkspaceAuthorizer {
  const doFetch = opts.fetch ?? fetch;
  const url = `${opts.apiUrl.replace(/\/+$/, '')}/inner/api/agent/execution-context/verify`;
  return {
    async authorize({ executionContext, workspaceId, runId, signal }) {
      if (!executionContext)
        throw new RunRefusedError(WORKSPACE_NOT_AUTHORIZED, `workspace ${workspaceId} is not authorized: the run has no execution context`);
      let last: unknown;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        try {
          const res = await doFetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-inner-api-key': opts.innerApiKey, 'x-agent-run-id': runId },
            body: JSON.stringify({ execution_context: executionContext, workspace_id: workspaceId, run_id: runId }),
            signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS),
          });
          const body = (await res.json().catch(() => null)) as { ok?: unknown; message?: unknown } | null;
          if (res.ok && body?.ok === true) return;
          if (res.status >= 400 && res.status < 500) {
            const why = typeof body?.message === 'string' ? body.message : `the api answered HTTP ${res.status}`;
            throw new RunRefusedError(WORKSPACE_NOT_AUTHORIZED, `workspace ${workspaceId} is not authorized for this run: ${why}`);
          }
          throw new Error(`the api answered HTTP ${res.status}`);
        } catch (err) {
          if (err instanceof RunRefusedError) throw err;
          if (signal?.aborted) throw signal.reason;
          last = err;
          await new Promise((r) => setTimeout(r, 200 * attempt));
        }
      }
      throw new RunRefusedError(
        null,
        `workspace ${workspaceId} could not be authorized: the api's inner endpoint is unreachable (${(last as Error)?.message ?? String(last)})`,
        'workspace_authorization_unavailable',
      );
    },
  };
}
