import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { afterAll, describe, expect, it } from 'vitest';
import importRules, { folders } from '../../../.dependency-cruiser.mjs';

/** The folders under functions/ (one level, and nlb/model), as the rule names them. */
function folderTree(): string[] {
  const top = readdirSync('functions', { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `functions/${entry.name}`);
  return [...top, 'functions/nlb/model'].sort();
}

/** functions/README.md's table: folder → what it may import, spelled as the rule spells it. */
function readmeTable(): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of readFileSync('functions/README.md', 'utf8').split('\n')) {
    const cells = /^\| `([^`]+)\/` +\| (.+?) +\| (.+?) +\|$/.exec(line);
    if (cells === null) continue;
    const imports =
      cells[3] === 'nothing else'
        ? []
        : [...cells[3]!.matchAll(/`([^`]+)`/g)].map(([, target]) =>
            target === 'functions/'
              ? 'functions'
              : `functions/${target!.endsWith('/') ? target!.slice(0, -1) : target}`,
          );
    rows.set(`functions/${cells[1]}`, imports);
  }
  return rows;
}

describe('one folder, one role: the import rule (.dependency-cruiser.mjs)', () => {
  const own = Object.entries(folders).filter(([folder]) => folder.startsWith('functions/'));

  it('names every folder of functions/ (and no folder that is gone)', () => {
    expect(own.map(([folder]) => folder).sort()).toEqual(folderTree());
  });

  it('is what functions/README.md says, folder by folder and in the same order', () => {
    const table = readmeTable();
    expect([...table.keys()]).toEqual(own.map(([folder]) => folder));
    for (const [folder, { imports }] of own) expect(table.get(folder), folder).toEqual(imports);
  });

  it('lets no folder import one listed after it (no upward imports)', () => {
    const order = Object.keys(folders);
    for (const [folder, { imports }] of Object.entries(folders)) {
      for (const target of imports) {
        const targetFolder = order.find(
          (candidate) => target === candidate || target.startsWith(`${candidate}/`),
        );
        // A broader grant (local/ and scripts/ may import all of functions/) has no single rank.
        if (targetFolder === undefined) continue;
        expect(order.indexOf(targetFolder), `${folder} → ${target}`).toBeLessThan(
          order.indexOf(folder),
        );
      }
    }
  });
});

describe('the import rule at work, on a probe tree', () => {
  const root = mkdtempSync(join(tmpdir(), 'import-rules-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  function write(files: Record<string, string>): void {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(root, dirname(path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
  }

  async function violations(paths: string[]): Promise<string[]> {
    const result = await cruise(paths, {
      ruleSet: {
        forbidden: importRules.forbidden,
        allowed: importRules.allowed,
        allowedSeverity: 'error',
      },
      baseDir: root,
      tsPreCompilationDeps: true,
      validate: true,
      outputType: 'json',
    });
    const output = JSON.parse(result.output as string) as ICruiseResult;
    return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
  }

  it('refuses an upward import (core reaching the runtime)', async () => {
    write({
      'functions/runtime/ports.ts': 'export interface Probe { readonly id: string }\n',
      'functions/core/probe.ts':
        "import type { Probe } from '../runtime/ports';\nexport const probe: Probe = { id: 'x' };\n",
    });
    expect(await violations(['functions/core/probe.ts'])).toContain(
      'not-in-allowed: functions/core/probe.ts → functions/runtime/ports.ts',
    );
  });

  it('refuses an import circle, type-only imports included', async () => {
    write({
      'functions/sync/a.ts': "import type { B } from './b';\nexport interface A { b?: B }\n",
      'functions/sync/b.ts': "import type { A } from './a';\nexport interface B { a?: A }\n",
    });
    expect(await violations(['functions/sync/a.ts'])).toContain(
      'no-circular: functions/sync/a.ts → functions/sync/b.ts',
    );
  });

  it('lets a folder import what its entry allows', async () => {
    write({
      'functions/core/keys.ts': 'export const key = 1;\n',
      'functions/runtime/uses-core.ts':
        "import { key } from '../core/keys';\nexport const k = key;\n",
    });
    expect(await violations(['functions/runtime/uses-core.ts'])).toEqual([]);
  });
});
