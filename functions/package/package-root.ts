import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageName = 'serverless-service-controller';

/**
 * The directory of this package: the checkout, or `node_modules/serverless-service-controller` once
 * installed. Found by walking up to our package.json rather than by a fixed `../..`, because the
 * same module runs from its TypeScript source (functions/…) and from the compiled bundles in
 * dist/, which sit at other depths.
 */
export function packageRoot(from: string = import.meta.url): string {
  let dir = dirname(from.startsWith('file:') ? fileURLToPath(from) : from);
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const { name } = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown };
      if (name === packageName) return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no ${packageName} package.json above ${from}`);
    dir = parent;
  }
}
