import { pathToFileURL } from 'node:url';

/**
 * `import.meta.url` for the CommonJS build (esbuild's `inject`): the sources find the package's
 * files from their own URL; CommonJS has `__filename` instead. Injected rather than prepended as
 * a banner, which would land before the bundle's "use strict" and turn strict mode off.
 */
export const importMetaUrl = pathToFileURL(__filename).href;
