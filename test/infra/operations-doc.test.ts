/**
 * docs/operations.md quotes each function's timeout in its runbook for a failed function; the
 * numbers come from the synthesised template, so a change to the stack fails here until the doc
 * follows (the node-sync timeout once read 30 s there while the stack had 60).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../infra/app';

function functionTimeouts(): Record<string, number> {
  const app = new App({
    outdir: mkdtempSync(join(tmpdir(), 'cdk-')),
    context: { clusterName: 'demo', vpcId: 'vpc-0123abcd', 'aws:cdk:bundling-stacks': [] },
  });
  const { stack } = createApp(app);
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
  const timeouts: Record<string, number> = {};
  for (const [id, resource] of Object.entries(functions)) {
    const name = /^(ServiceSync|NodeSync|Sweep)/.exec(id)?.[1];
    const timeout = (resource as { Properties: { Timeout?: number } }).Properties.Timeout;
    if (name !== undefined && timeout !== undefined) timeouts[name] = timeout;
  }
  return timeouts;
}

describe('docs/operations.md', () => {
  it('quotes the timeouts the stack gives the functions', () => {
    const text = readFileSync('docs/operations.md', 'utf8').replace(/\s+/g, ' ');
    const quoted = /\(service-sync (\d+) s, node-sync (\d+) s, sweep (\d+) s\)/.exec(text);
    expect(quoted, 'the runbook line naming the three timeouts').not.toBeNull();
    const timeouts = functionTimeouts();
    expect({
      ServiceSync: Number(quoted?.[1]),
      NodeSync: Number(quoted?.[2]),
      Sweep: Number(quoted?.[3]),
    }).toEqual(timeouts);
  }, 120_000);
});
