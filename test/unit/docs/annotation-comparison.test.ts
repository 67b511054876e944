import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { annotationRegistry } from '../../../functions/nlb/model/annotations';
import {
  annotationTable,
  comparisonPattern,
  generatedTable,
} from '../../../scripts/write-annotation-docs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const doc = readFileSync(join(root, 'docs/annotations.md'), 'utf8');

describe('the comparison with the other controllers (issue 20, item 10)', () => {
  it('gives every registry entry a value for both controllers, each starting with same, differs: or not supported', () => {
    const bad = annotationRegistry.flatMap((definition) =>
      [
        ['aws-load-balancer-controller', definition.compared?.albc],
        ['cloud-provider-aws', definition.compared?.cloudProviderAws],
      ]
        .filter(([, value]) => value === undefined || !comparisonPattern.test(value))
        .map(([controller, value]) => `${definition.name} (${controller}): ${String(value)}`),
    );
    expect(bad).toEqual([]);
  });

  it('accepts the three forms and nothing else', () => {
    for (const good of [
      'same',
      'same (deprecated there)',
      'differs: default 30 s',
      'not supported: no such annotation',
      'not supported for NLBs: Classic only',
    ])
      expect(good).toMatch(comparisonPattern);
    for (const bad of ['Same', 'differs', 'differs:', 'not supported', 'yes', 'samey'])
      expect(bad).not.toMatch(comparisonPattern);
  });

  it('shows both as columns of the generated table in docs/annotations.md', () => {
    const table = generatedTable(doc) ?? '';
    expect(table).toBe(annotationTable());
    expect(table.split('\n')[0]).toContain(
      '| in aws-load-balancer-controller | in cloud-provider-aws |',
    );
    const nameRow = table.split('\n').find((line) => line.includes('aws-load-balancer-name`'));
    expect(nameRow).toMatch(
      /\| not supported: cloud-provider-aws names the NLB from the Service UID \|$/,
    );
  });
});
