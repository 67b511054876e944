// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** The pure core may not reach I/O, the clock, randomness or the environment (DESIGN §1, STYLE). */
const coreBoundary = {
  files: ['functions/core/**/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          { regex: '^node:', message: 'functions/core is pure: no Node built-ins.' },
          {
            regex: '^(fs|http|https|net|dns|child_process|crypto|os|path|process|timers)(/|$)',
            message: 'functions/core is pure: no Node built-ins.',
          },
          {
            regex: '^@aws-sdk/',
            message: 'functions/core is pure: AWS calls belong in functions/aws.',
          },
          {
            regex: '^@smithy/',
            message: 'functions/core is pure: AWS calls belong in functions/aws.',
          },
          {
            regex: '^@kubernetes/',
            message: 'functions/core is pure: Kubernetes calls belong in functions/kube.',
          },
          {
            regex: '^\\.\\./',
            message: 'functions/core imports only from functions/core (dependencies point inward).',
          },
        ],
      },
    ],
    'no-restricted-globals': [
      'error',
      { name: 'process', message: 'Inject configuration instead of reading the environment.' },
      { name: 'fetch', message: 'functions/core is pure: no I/O.' },
      { name: 'setTimeout', message: 'Inject a clock.' },
      { name: 'setInterval', message: 'Inject a clock.' },
    ],
    'no-restricted-properties': [
      'error',
      { object: 'Date', property: 'now', message: 'Inject a clock.' },
      { object: 'Math', property: 'random', message: 'Inject randomness.' },
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

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', 'coverage/'] },
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
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  coreBoundary,
  prettier,
);
