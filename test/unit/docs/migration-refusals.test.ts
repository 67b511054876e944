import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { annotationRegistry, parseAnnotations } from '../../../functions/nlb/model/annotations';
import { TerminalError } from '../../../functions/core/errors';
import { makeService } from '../../../kit/core-objects';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const migration = readFileSync(join(root, 'docs/migration.md'), 'utf8');
const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;

/** The part of docs/migration.md that lists what is refused, and why. */
const refusedSection = migration.slice(
  migration.indexOf('These are errors here'),
  migration.indexOf('## From the built-in cloud controller'),
);

/** The first column of the table: the annotations refused (the others give reasons and advice). */
const refusedCells = [...refusedSection.matchAll(/^\| (.*?) \|/gm)]
  .map((match) => match[1] ?? '')
  .join('\n');

/** What the table lists as refused, as a Service would carry it (name, a value). */
const refused: [string, string][] = [
  [aws('disable-nlb-sg'), 'true'],
  [aws('enable-prefix-for-ipv6-source-nat'), 'on'],
  [aws('source-nat-ipv6-prefixes'), '2600:1f13:83d:6c00::/80'],
  [aws('multi-cluster-target-group'), 'true'],
  [aws('minimum-load-balancer-capacity'), 'CapacityUnits=1000'],
  [aws('inbound-sg-rules-on-private-link-traffic'), 'off'],
  [aws('quic-enabled-ports'), '443'],
  [aws('target-group-attributes'), 'load_balancing.algorithm.type=round_robin'],
  [aws('connection-draining-enabled'), 'true'],
  [aws('connection-draining-timeout'), '60'],
  [aws('connection-idle-timeout'), '60'],
  [aws('access-log-emit-interval'), '5'],
  [aws('extra-security-groups'), 'sg-0123456789abcdef0'],
];

describe('docs/migration.md: the annotations refused here', () => {
  it.each(refused)('%s: %s is refused with a terminal error naming it', (name, value) => {
    const parse = () => parseAnnotations(makeService({ annotations: { [name]: value } }));
    expect(parse).toThrow(TerminalError);
    expect(parse).toThrow(name);
  });

  it.each(refused)('%s is in the table', (name) => {
    const suffix = name.slice(aws('').length);
    expect(refusedCells).toMatch(new RegExp(`\`(aws-load-balancer)?-${suffix}\\b`));
  });

  it('lists no annotation the registry supports, except for the values it refuses', () => {
    const refusedValuesOnly = new Set([aws('target-group-attributes')]);
    const listed = annotationRegistry
      .map((definition) => definition.name)
      .filter((name) => !refusedValuesOnly.has(name))
      .filter((name) =>
        refusedCells.includes(`\`${name.slice('service.beta.kubernetes.io/'.length)}`),
      );
    expect(listed).toEqual([]);
  });
});
