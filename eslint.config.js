import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'coverage/**', 'test-results/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        performance: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        NodeJS: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: '@runtasks/shared',
              message: 'Import the layer you need: @runtasks/shared/domain, /db, /queue, /config, /errors, /logger, …',
            },
          ],
        },
      ],
    },
  },
  {
    // Not yet converted to the layered imports of `@runtasks/shared`; remove each file once it is.
    files: [
      'services/worker/src/**/*.ts',
      'services/worker/test/**/*.ts',
      'services/api/src/services/run.service.ts',
      'services/api/src/services/task-stage.service.ts',
      'services/api/src/services/execution-report.service.ts',
      'services/api/src/routes/callback.routes.ts',
      'services/api/src/routes/task-stages.routes.ts',
      'services/api/src/routes/executions.routes.ts',
    ],
    rules: { 'no-restricted-imports': 'off' },
  },
);
