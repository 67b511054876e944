import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/**
 * Whether the module at `moduleUrl` is the script Node was started with (`node file`, `tsx
 * file`), as opposed to imported. Compared as file URLs of the real path: a path with a space or
 * a non-ASCII character is percent-encoded in `import.meta.url`, and a package manager may start
 * it through a symlink; a plain string comparison then silently skips the script's work.
 */
export function runAsScript(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === moduleUrl;
  } catch {
    return false;
  }
}
