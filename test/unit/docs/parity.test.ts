import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const docsDir = resolve(dirname(fileURLToPath(import.meta.url)), '../../../docs');
const parity = readFileSync(resolve(docsDir, 'parity.md'), 'utf8');
const rows = parity.split('\n').filter((line) => /^\| (S|I)\d+\s+\|/.test(line));

function linkedTests(row: string): { name: string; file: string }[] {
  return [...row.matchAll(/\[([^\]]+)\]\((\.\.\/test\/[^)]+\.test\.ts)\)/g)].map((m) => ({
    name: m[1] ?? '',
    file: resolve(docsDir, m[2] ?? ''),
  }));
}

describe('docs/parity.md', () => {
  it('has a row for every seed behaviour S1–S19', () => {
    const ids = rows.map((row) => /^\| (S\d+)\s/.exec(row)?.[1]).filter(Boolean);
    expect(ids).toEqual(Array.from({ length: 19 }, (_, i) => `S${i + 1}`));
  });

  it('names at least one test in every row, or says what is Pending', () => {
    for (const row of rows) {
      expect(linkedTests(row).length > 0 || row.includes('**Pending**'), row.slice(0, 40)).toBe(
        true,
      );
    }
  });

  it('links only to tests that exist, by their exact names', () => {
    const missing: string[] = [];
    for (const { name, file } of rows.flatMap(linkedTests)) {
      const source = existsSync(file) ? readFileSync(file, 'utf8') : '';
      const quoted = [`'${name}'`, `"${name}"`, `\`${name}\``];
      if (!quoted.some((q) => source.includes(q))) missing.push(`${name} (${file})`);
    }
    expect(missing).toEqual([]);
  });
});
