import { describe, expect, it } from 'vitest';
import { TerminalError } from '../../../functions/core/errors';
import type { Service, ServicePort } from '../../../functions/core/objects';
import { validateLoadBalancerService } from '../../../functions/core/service-validation';
import { serviceLimits, sizeProblems } from '../../../functions/core/service-limits';
import { makeService } from '../../../kit/core-objects';

const aws = (suffix: string) => `service.beta.kubernetes.io/aws-load-balancer-${suffix}`;
const legacySourceRanges = 'service.beta.kubernetes.io/load-balancer-source-ranges';
const ranges = (count: number) =>
  Array.from({ length: count }, (_, i) => `10.${Math.floor(i / 256) % 256}.${i % 256}.0/24`);
/** 50 TCP_UDP ports: the most listeners a Network Load Balancer has, each with two rules per range. */
const tcpUdpPorts: ServicePort[] = Array.from({ length: 50 }, (_, i) => [
  { name: `t${i}`, protocol: 'TCP', port: 1000 + i, nodePort: 30000 + i },
  { name: `u${i}`, protocol: 'UDP', port: 1000 + i, nodePort: 30000 + i },
]).flat();

function validationError(service: Service): TerminalError {
  try {
    validateLoadBalancerService(service);
  } catch (error) {
    if (error instanceof TerminalError) return error;
    throw error;
  }
  throw new Error('validated without a terminal error');
}

describe('size limits, checked before anything is built', () => {
  it('refuses 25,000 source ranges on 50 TCP_UDP listeners from the count alone', () => {
    const service = makeService({
      ports: tcpUdpPorts,
      spec: { loadBalancerSourceRanges: ranges(25_000) },
    });
    const error = validationError(service);
    expect(error.message).toBe(
      `spec.loadBalancerSourceRanges has 25000 entries, over the limit of ${serviceLimits.sourceRanges}`,
    );
  });

  it('counts the legacy source-ranges annotation the same way', () => {
    const service = makeService({
      annotations: { [legacySourceRanges]: ranges(1001).join(',') },
    });
    expect(validationError(service).message).toBe(
      `annotation ${legacySourceRanges} has 1001 entries, over the limit of ${serviceLimits.sourceRanges}`,
    );
  });

  it('accepts as many source ranges as the limit (the security group rule count is the model’s)', () => {
    const service = makeService({
      spec: { loadBalancerSourceRanges: ranges(serviceLimits.sourceRanges) },
    });
    expect(sizeProblems(service)).toEqual([]);
  });

  it('refuses more ports than 50 TCP_UDP listeners can use, before grouping them', () => {
    const ports: ServicePort[] = Array.from({ length: 101 }, (_, i) => ({
      protocol: 'TCP',
      port: 1000 + i,
      nodePort: 30000 + i,
    }));
    expect(validationError(makeService({ ports })).message).toBe(
      `spec.ports has 101 entries, over the limit of ${serviceLimits.servicePorts}`,
    );
  });

  it('refuses a 200 KB load balancer annotation, naming it without echoing it', () => {
    const service = makeService({ annotations: { [aws('scheme')]: 'x'.repeat(200_000) } });
    const error = validationError(service);
    expect(error.message).toBe(
      `annotation ${aws('scheme')} is 200000 characters, over the limit of ${serviceLimits.annotationValueChars}`,
    );
  });

  it('refuses load balancer annotations that are too large together', () => {
    const half = 'v'.repeat(serviceLimits.annotationValueChars);
    const service = makeService({
      annotations: {
        [aws('a')]: half,
        [aws('b')]: half,
        [aws('c')]: half,
      },
    });
    expect(validationError(service).message).toMatch(
      new RegExp(
        `^the service\\.beta\\.kubernetes\\.io/ annotations hold \\d+ characters, over the limit of ${serviceLimits.loadBalancerAnnotationChars}$`,
      ),
    );
  });

  it('leaves other annotations alone: kubectl’s last-applied-configuration may be large', () => {
    const service = makeService({
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(200_000) },
    });
    expect(validateLoadBalancerService(service)).toHaveLength(2);
  });

  it('stops at the size problems: the rest is not even looked at', () => {
    const service = makeService({
      ports: [...tcpUdpPorts, { protocol: 'SCTP', port: 9, nodePort: 9 }],
      spec: { loadBalancerIP: '10.0.0.1' },
    });
    expect(validationError(service).message).toBe(
      `spec.ports has 101 entries, over the limit of ${serviceLimits.servicePorts}`,
    );
  });
});

describe('echoes of user values are bounded', () => {
  it('cuts a 200 KB protocol name in the error', () => {
    const protocol = 'P'.repeat(200_000);
    const error = validationError(makeService({ ports: [{ protocol, port: 80, nodePort: 1 }] }));
    expect(error.message.length).toBeLessThan(400);
    expect(error.message).toContain('(200000 characters)');
  });

  it('cuts a large ipFamilies list in the error', () => {
    const ipFamilies = Array.from({ length: 10_000 }, () => 'IPv6');
    const error = validationError(makeService({ spec: { ipFamilies } }));
    expect(error.message.length).toBeLessThan(400);
  });
});
