/**
 * Before a run's runtime layer enters, the api confirms the run may use the workspace it names (issue 27):
 * `POST {apiUrl}/inner/api/agent/execution-context/verify` with the inner API key, the run's signed execution
 * context, the runtime layer's workspace id and the run id. The backend cannot decide this itself: it does not hold
 * EXECUTION_CONTEXT_SIGNING_KEY (it must not be able to mint a context). One round trip per run with a runtime layer.
 */
import { RunRefusedError } from './errors.js';
import { postInnerApi, type InnerApiTarget } from './inner-api-call.js';
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

export function createWorkspaceAuthorizer(opts: InnerApiTarget): WorkspaceAuthorizer {
  return {
    async authorize({ executionContext, workspaceId, runId, signal }) {
      if (!executionContext)
        throw new RunRefusedError(WORKSPACE_NOT_AUTHORIZED, `workspace ${workspaceId} is not authorized: the run has no execution context`);
      await postInnerApi(
        opts,
        '/inner/api/agent/execution-context/verify',
        { execution_context: executionContext, workspace_id: workspaceId, run_id: runId },
        {
          runId,
          signal,
          timeoutMs: TIMEOUT_MS,
          attempts: ATTEMPTS,
          settle: ({ status, ok, body }) => {
            const b = body as { ok?: unknown; message?: unknown } | null;
            if (ok && b?.ok === true) return;
            if (status >= 400) {
              const why = typeof b?.message === 'string' ? b.message : `the api answered HTTP ${status}`;
              throw new RunRefusedError(WORKSPACE_NOT_AUTHORIZED, `workspace ${workspaceId} is not authorized for this run: ${why}`);
            }
            throw new Error(`the api answered HTTP ${status}`);
          },
          final: (err) => err instanceof RunRefusedError,
          exhausted: (last) =>
            new RunRefusedError(
              null,
              `workspace ${workspaceId} could not be authorized: the api's inner endpoint is unreachable (${(last as Error)?.message ?? String(last)})`,
              'workspace_authorization_unavailable',
            ),
        },
      );
    },
  };
}
