// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/**
 * functions/core and functions/sync may not reach I/O, the clock, randomness or the environment
 * (docs/design.md §1): adapters are injected through the ports in functions/sync/ports.ts.
 * Dependencies point inward: core imports only core; sync imports core and sync.
 * @param {string[]} files
 * @param {string} outwardImport
 * @param {string} outwardMessage
 * @returns {import('eslint').Linter.Config}
 */
function pureBoundary(files, outwardImport, outwardMessage) {
  return {
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '^node:', message: 'Pure code: no Node built-ins.' },
            {
              regex:
                '^(fs|http|https|net|dns|child_process|crypto|os|path|process|timers|worker_threads)(/|$)',
              message: 'Pure code: no Node built-ins.',
            },
            { regex: '^@aws-sdk/', message: 'Pure code: AWS calls belong in functions/aws.' },
            { regex: '^@smithy/', message: 'Pure code: AWS calls belong in functions/aws.' },
            {
              regex: '^@kubernetes/',
              message: 'Pure code: Kubernetes calls belong in functions/kube.',
            },
            { regex: outwardImport, message: outwardMessage },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'Inject configuration instead of reading the environment.' },
        { name: 'fetch', message: 'Pure code: no I/O.' },
        { name: 'setTimeout', message: 'Inject a clock.' },
        { name: 'setInterval', message: 'Inject a clock.' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Inject a clock.' },
        { object: 'Math', property: 'random', message: 'Inject randomness.' },
        { object: 'console', message: 'Pure code: no I/O; return what happened instead.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Inject a clock.',
        },
      ],
    },
  };
}

const coreBoundary = pureBoundary(
  ['functions/core/**/*.ts'],
  '^\\.\\./',
  'functions/core imports only from functions/core (dependencies point inward).',
);
const awsModelBoundary = pureBoundary(
  ['functions/nlb/model/**/*.ts'],
  '^\\.\\./(?!\\.\\./core/)',
  'functions/nlb/model is the pure NLB model: it imports only functions/core and itself.',
);
const useCaseBoundary = pureBoundary(
  ['functions/sync/**/*.ts'],
  '^\\.\\./(?!core/)',
  'functions/sync imports only functions/core and functions/sync.',
);

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', 'coverage/', 'dist/', 'infra/k8s/code/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['**/*.js', '.dependency-cruiser.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  coreBoundary,
  useCaseBoundary,
  awsModelBoundary,
  prettier,
);
