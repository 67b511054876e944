import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

// zod's tree-shakable "mini" form ships no error messages; the English ones keep configuration
// and message errors readable ("Unrecognized key: ..." rather than "Invalid input"). Only English
// is imported: the locale index would bundle every language. Importing this module applies it.
// In the package's CommonJS build (dist/index.cjs) Node's interop hands over the CommonJS module
// object, whose `default` is the function.
const english: typeof en =
  typeof en === 'function' ? en : (en as unknown as { default: typeof en }).default;
config(english());
