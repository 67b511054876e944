import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

// zod's tree-shakable "mini" form ships no error messages; the English ones keep configuration
// and message errors readable ("Unrecognized key: ..." rather than "Invalid input"). Only English
// is imported: the locale index would bundle every language. Importing this module applies it.
config(en());
