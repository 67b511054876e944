import { describe, expect, it } from 'vitest';
import { ipTargetsFor, type EndpointSliceView } from '../../../functions/core/endpoint-targets';

const pod = (ip: string, conditions?: { ready?: boolean; terminating?: boolean }) => ({
  addresses: [ip],
  targetRef: { kind: 'Pod' },
  ...(conditions ? { conditions } : {}),
});

const slice = (
  endpoints: EndpointSliceView['endpoints'],
  ports: EndpointSliceView['ports'] = [{ name: 'http', port: 8080, protocol: 'TCP' }],
  addressType = 'IPv4',
): EndpointSliceView => ({ addressType, ports, endpoints });

describe('ip targets from EndpointSlices', () => {
  it('registers ready pods, and pods whose readiness is not known, on the slice port named as the Service port', () => {
    const targets = ipTargetsFor(
      { name: 'http', protocol: 'TCP' },
      [slice([pod('10.0.1.5', { ready: true }), pod('10.0.1.4')])],
      'IPv4',
    );
    expect(targets).toEqual({
      serving: [
        { ip: '10.0.1.4', port: 8080 },
        { ip: '10.0.1.5', port: 8080 },
      ],
      terminating: [],
    });
  });

  it('keeps terminating pods apart (deregistered first), and leaves out pods that are only not ready', () => {
    const targets = ipTargetsFor(
      { name: 'http' },
      [
        slice([
          pod('10.0.1.5', { ready: false, terminating: true }),
          pod('10.0.1.6', { ready: false }),
          pod('10.0.1.7', { ready: true }),
        ]),
      ],
      'IPv4',
    );
    expect(targets.serving).toEqual([{ ip: '10.0.1.7', port: 8080 }]);
    expect(targets.terminating).toEqual([{ ip: '10.0.1.5', port: 8080 }]);
  });

  it('resolves a named target port per slice: two slices may carry different numbers', () => {
    const targets = ipTargetsFor(
      { name: 'http' },
      [
        slice([pod('10.0.1.5')], [{ name: 'http', port: 8080 }]),
        slice([pod('10.0.2.5')], [{ name: 'http', port: 9090 }]),
      ],
      'IPv4',
    );
    expect(targets.serving).toEqual([
      { ip: '10.0.1.5', port: 8080 },
      { ip: '10.0.2.5', port: 9090 },
    ]);
  });

  it('matches the port by name and protocol, an unnamed Service port to the unnamed slice port', () => {
    const ports = [
      { name: 'dns', port: 53, protocol: 'UDP' },
      { name: 'dns-tcp', port: 53, protocol: 'TCP' },
    ];
    expect(
      ipTargetsFor({ name: 'dns', protocol: 'UDP' }, [slice([pod('10.0.1.5')], ports)], 'IPv4')
        .serving,
    ).toEqual([{ ip: '10.0.1.5', port: 53 }]);
    expect(
      ipTargetsFor({ name: 'dns', protocol: 'TCP' }, [slice([pod('10.0.1.5')], ports)], 'IPv4')
        .serving,
    ).toEqual([]);
    expect(
      ipTargetsFor({}, [slice([pod('10.0.1.5')], [{ name: '', port: 80 }])], 'IPv4').serving,
    ).toEqual([{ ip: '10.0.1.5', port: 80 }]);
  });

  it('counts only Pod endpoints of the address family asked for, once each', () => {
    const targets = ipTargetsFor(
      { name: 'http' },
      [
        slice([
          pod('10.0.1.5'),
          { addresses: ['10.0.9.9'], targetRef: { kind: 'Node' } },
          { addresses: ['10.0.9.8'] },
        ]),
        slice([pod('fd00::5')], undefined, 'IPv6'),
        // A slice being replaced: the same pod, terminating in the old, serving in the new.
        slice([pod('10.0.1.5', { ready: false, terminating: true })]),
      ],
      'IPv4',
    );
    expect(targets).toEqual({ serving: [{ ip: '10.0.1.5', port: 8080 }], terminating: [] });
  });

  it('counts no pod that a reference to another namespace names: not this Service’s to expose', () => {
    const own = { ...slice([pod('10.0.1.5')]), namespace: 'team-a' };
    const foreign = {
      ...slice([{ addresses: ['10.0.2.7'], targetRef: { kind: 'Pod', namespace: 'team-b' } }]),
      namespace: 'team-a',
    };
    const same = {
      ...slice([{ addresses: ['10.0.1.6'], targetRef: { kind: 'Pod', namespace: 'team-a' } }]),
      namespace: 'team-a',
    };
    expect(ipTargetsFor({ name: 'http' }, [own, foreign, same], 'IPv4').serving).toEqual([
      { ip: '10.0.1.5', port: 8080 },
      { ip: '10.0.1.6', port: 8080 },
    ]);
  });
});
