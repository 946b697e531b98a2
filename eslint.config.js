import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '**/dist/', 'examples/', 'coverage/', '.cache/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // The dashboard page: text goes into the DOM as text, never as markup (values come from API callers); no eval.
    files: ['src/gateway/dashboard/page/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'write', 'writeln', 'createContextualFragment', 'setHTMLUnsafe'].map((property) => ({
          property,
          message: 'Build elements with dom.ts (h, svg): text nodes cannot become markup.',
        })),
      ],
      'no-restricted-globals': ['error', 'eval'],
      'no-implied-eval': 'error',
      'no-new-func': 'error',
    },
  },
);
