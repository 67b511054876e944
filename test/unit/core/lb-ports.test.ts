import { describe, expect, it } from 'vitest';
import { TerminalError } from '../../../functions/core/errors';
import { loadBalancerPorts } from '../../../functions/core/lb-ports';
import type { ServicePort } from '../../../functions/core/objects';
import { validateLoadBalancerService } from '../../../functions/core/service-validation';
import { makeService } from '../../../kit/core-objects';

const withPorts = (ports: ServicePort[]) => makeService({ ports });

describe('load balancer ports (S14)', () => {
  it('makes one TCP or UDP listener per port', () => {
    const ports = loadBalancerPorts(
      withPorts([
        { name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 },
        { name: 'syslog', protocol: 'UDP', port: 514, nodePort: 30514 },
      ]),
    );
    expect(ports).toEqual([
      { port: 80, protocol: 'TCP', nodePort: 30080, targetPort: 80, names: ['http'] },
      { port: 514, protocol: 'UDP', nodePort: 30514, targetPort: 514, names: ['syslog'] },
    ]);
  });

  it('merges TCP and UDP on the same port into one TCP_UDP listener', () => {
    const ports = loadBalancerPorts(
      withPorts([
        { name: 'dns-tcp', protocol: 'TCP', port: 53, nodePort: 30053 },
        { name: 'dns-udp', protocol: 'UDP', port: 53, nodePort: 30053 },
      ]),
    );
    expect(ports).toEqual([
      {
        port: 53,
        protocol: 'TCP_UDP',
        nodePort: 30053,
        targetPort: 53,
        names: ['dns-tcp', 'dns-udp'],
      },
    ]);
  });

  it('rejects TCP and UDP on one port with different nodePorts, saying so', () => {
    const service = withPorts([
      { name: 'dns-tcp', protocol: 'TCP', port: 53, nodePort: 30053 },
      { name: 'dns-udp', protocol: 'UDP', port: 53, nodePort: 30054 },
    ]);
    expect(() => loadBalancerPorts(service)).toThrow(TerminalError);
    expect(() => loadBalancerPorts(service)).toThrow(
      'ports 53/TCP and 53/UDP must use the same nodePort to share a TCP_UDP listener (they use 30053 and 30054)',
    );
  });

  it('needs no nodePort for pod targets, whose TCP_UDP listener needs one targetPort instead', () => {
    const noNodePorts = makeService({
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 'web' },
        { name: 'dns-tcp', protocol: 'TCP', port: 53, targetPort: 5353 },
        { name: 'dns-udp', protocol: 'UDP', port: 53, targetPort: 5353 },
      ],
      spec: { allocateLoadBalancerNodePorts: false },
    });
    expect(validateLoadBalancerService(noNodePorts, 'pods')).toEqual([
      {
        port: 53,
        protocol: 'TCP_UDP',
        nodePort: 0,
        targetPort: 5353,
        names: ['dns-tcp', 'dns-udp'],
      },
      { port: 80, protocol: 'TCP', nodePort: 0, targetPort: 'web', names: ['http'] },
    ]);
    expect(() => validateLoadBalancerService(noNodePorts)).toThrow(
      /allocateLoadBalancerNodePorts: false is not supported.*has no nodePort/,
    );
    const split = withPorts([
      { name: 'dns-tcp', protocol: 'TCP', port: 53, targetPort: 5353 },
      { name: 'dns-udp', protocol: 'UDP', port: 53, targetPort: 'dns' },
    ]);
    expect(() => loadBalancerPorts(split, 'pods')).toThrow(
      'ports 53/TCP and 53/UDP must use the same targetPort to share a TCP_UDP listener with pod targets (they use 5353 and dns)',
    );
  });

  it('rejects SCTP, missing nodePorts and more than 50 listeners', () => {
    expect(() =>
      loadBalancerPorts(withPorts([{ protocol: 'SCTP', port: 9, nodePort: 30009 }])),
    ).toThrow(/TCP and UDP only/);
    expect(() => loadBalancerPorts(withPorts([{ protocol: 'TCP', port: 80 }]))).toThrow(
      /has no nodePort/,
    );
    const many = Array.from({ length: 51 }, (_, i) => ({
      protocol: 'TCP',
      port: 1000 + i,
      nodePort: 30000 + i,
    }));
    expect(() => loadBalancerPorts(withPorts(many))).toThrow(
      '51 listeners exceed the Network Load Balancer limit of 50',
    );
  });

  it('rejects a Service without ports', () => {
    expect(() => loadBalancerPorts(withPorts([]))).toThrow(/at least one port/);
  });
});

describe('unsupported Service fields', () => {
  it.each([
    [
      { allocateLoadBalancerNodePorts: false },
      'spec.allocateLoadBalancerNodePorts: false is not supported',
    ],
    [{ loadBalancerIP: '1.2.3.4' }, 'spec.loadBalancerIP is not supported'],
    [{ ipFamilies: ['IPv4', 'IPv6'] }, 'spec.ipFamilies ["IPv4","IPv6"] is not supported'],
  ])('names %j in a terminal error', (spec, message) => {
    expect(() => validateLoadBalancerService(makeService({ spec }))).toThrow(message);
  });

  it('reports every problem at once', () => {
    const service = makeService({
      spec: { loadBalancerIP: '1.2.3.4' },
      ports: [{ protocol: 'SCTP', port: 9, nodePort: 1 }],
    });
    expect(() => validateLoadBalancerService(service)).toThrow(/loadBalancerIP.*; port 9\/SCTP/);
  });

  it('accepts an ordinary LoadBalancer Service', () => {
    expect(validateLoadBalancerService(makeService())).toHaveLength(2);
  });
});

describe('port limits before any listener is built', () => {
  it('refuses more than 100 ports from the count, before grouping them', () => {
    const ports: ServicePort[] = Array.from({ length: 5000 }, (_, i) => ({
      protocol: 'SCTP',
      port: i,
    }));
    expect(() => loadBalancerPorts(withPorts(ports))).toThrow(
      new TerminalError('spec.ports has 5000 entries, over the limit of 100'),
    );
  });

  it('cuts a long protocol name in the error', () => {
    const protocol = 'P'.repeat(200_000);
    let message = '';
    try {
      loadBalancerPorts(withPorts([{ protocol, port: 80, nodePort: 30080 }]));
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe(
      `port 80/${'P'.repeat(100)}… (200000 characters): Network Load Balancers support TCP and UDP only`,
    );
  });
});
