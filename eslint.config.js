import tseslint from 'typescript-eslint';

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
            '../core/db*',
            '../core/generated/*',
            '@temporalio/activity',
            '@temporalio/client',
            '@temporalio/worker',
          ],
        },
      ],
    },
  },
);
