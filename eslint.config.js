import tseslint from 'typescript-eslint';

/**
 * What agent-backend/ may take from core/domain/ (everything else there is the api's and the worker's): arithmetic
 * and file-layout rules both processes must agree on byte for byte, kept in one place rather than copied.
 */
const AGENT_BACKEND_DOMAIN_EXCEPTIONS = [
  // The backend prices the model calls of a run with the catalogue's prices (agent-loop.ts, usage.ts) and estimates
  // tokens where a model reported none (usage.ts), as the api's own model calls do; a call whose llm layer names no
  // context window gets the built-in catalogue's (agent-loop.ts).
  'llm/pricing',
  'llm/tokens',
  'llm/catalogue/index',
  // It redacts provider secrets from the error chunks it streams (model/part-stream.ts), as the api does.
  'llm/redact',
  // It lists the workspace's outputs/ and meters them against the output quota (modules/context.ts,
  // workspace/sandbox.ts) exactly as the api later copies them into uploads.
  'workspace-outputs',
  'output-quota',
  // The workspace bucket's format (WORKSPACE_STORE=s3): the backend saves and restores whole workspaces in it, the api
  // and the worker add uploads, read tool files, fork and retire through the same module — one owner of the format.
  'workspace-bucket',
  // It prepares the workspace and reads/writes its marker by descriptor, as the api places files (issue 45:
  // docs/security.md "Root never walks a tenant tree").
  'workspace-fs',
  // The workspace's identity marker (WORKSPACES_DIR/.markers/<id>): the backend writes it and checks it on entry, the
  // api writes it for a fork and the api and the worker remove it with a retired or lost workspace — one format.
  'workspace-marker',
  // With WORKSPACE_STORE=s3 it saves and restores the workspace (workspace/store.ts) with the walk and the writer that
  // copy a tenant tree by descriptor (the fork's), under the same rule.
  'workspace-tree',
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'core/generated/**', '.data/**', '.cache/**', 'coverage/**', 'web/vendor/**', 'scratch/**', 'dist/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-console': 'off',
    },
  },
  {
    // Workflow code must stay deterministic: no Node built-ins, no I/O libraries.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            'node:*',
            'fs',
            'path',
            'crypto',
            'pg',
            'express',
            '@prisma/*',
            '../core/platform/db*',
            '../core/generated/*',
            '@temporalio/activity',
            '@temporalio/client',
            '@temporalio/worker',
          ],
        },
      ],
    },
  },
  {
    // core/ is the floor everything stands on: it imports none of the processes or the turn's rooms.
    files: ['core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(workflows|activities|api|agent-backend|stack|worker)(/|\\.js$|$)',
              message: 'core/ may not import workflows/, activities/, api/, agent-backend/, stack/ or the worker.',
            },
          ],
        },
      ],
    },
  },
  {
    // The api stands on core/ (the turn's records and their verbs in core/domain/turn/, the workflow contract in
    // core/protocol/): activities/ are the worker's turn steps, and agent-backend/ is another process, reached over
    // HTTP. One exception, by name: a user stop of a message still queued ends it at once, with the very ending the
    // queue's coordinator uses (activities/conversation-queue.ts stopQueuedMessage), so the two cannot drift.
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(agent-backend(/|\\.js$|$)|activities(/(?!conversation-queue\\.js$)|\\.js$|$))',
              message: "the api may not import activities/ or agent-backend/: take the turn's records from core/ (core/domain/turn/).",
            },
            {
              regex: '^(\\.\\./)+activities/conversation-queue\\.js$',
              allowImportNames: ['stopQueuedMessage'],
              message: 'the api takes only stopQueuedMessage (the queued-message stop) from activities/conversation-queue.ts.',
            },
          ],
        },
      ],
    },
  },
  {
    // The agent backend is its own process: it shares core's platform and protocol, not core's domain.
    files: ['agent-backend/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(\\.\\./)+core/domain/(?!(${AGENT_BACKEND_DOMAIN_EXCEPTIONS.join('|')})\\.js$)`,
              message: 'agent-backend/ may import core/platform/ and core/protocol/ only (exceptions: AGENT_BACKEND_DOMAIN_EXCEPTIONS).',
            },
            {
              regex: '^(\\.\\./)+(core/generated|workflows|activities|api|stack|worker)(/|\\.js$|$)',
              message: 'agent-backend/ is its own process: it reaches the api over HTTP, not by import.',
            },
          ],
        },
      ],
    },
  },
);
