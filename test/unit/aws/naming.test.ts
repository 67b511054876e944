import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  isValidElbName,
  loadBalancerName,
  ownershipOf,
  ownershipTags,
  resourceTags,
  securityGroupName,
  targetGroupName,
} from '../../../functions/nlb/model/naming';
import { canonicalJson, stableHash } from '../../../functions/core/hash';
import type { Scheme } from '../../../functions/nlb/model/types';
import type { Service } from '../../../functions/core/objects';
import { makeService } from '../../../kit/core-objects';

/*
 * ELBv2 naming rules (load balancers and target groups): 1–32 characters, only letters, digits and
 * hyphens, no leading or trailing hyphen, and a load balancer name may not start with "internal-".
 * moto does not enforce these, so the integration tests against moto cannot catch a bad name:
 * these unit tests are the only guard before real AWS rejects a CreateLoadBalancer call.
 */

/** The AWS rule, written out independently of isValidElbName. */
const awsNameRule = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?$/;

const service = (namespace: string, name: string, uid = 'uid-1'): Service =>
  makeService({ namespace, name, uid });

const long63 = 'a'.repeat(63);

describe('load balancer and target group names', () => {
  it.each<[string, string, string, RegExp]>([
    ['ordinary names', 'default', 'web', /^k8s-default-web-[0-9a-z]{10}$/],
    ['63-character namespace and name', long63, long63, /^k8s-aaaaaaaa-aaaaaaaa-[0-9a-z]{10}$/],
    [
      'names that end in a hyphen once cut to 8 characters',
      'kube-system',
      'payment-gateway',
      /^k8s-kube-sys-payment-[0-9a-z]{10}$/,
    ],
    ['names cut to nothing but hyphens', 'a-------b', 'x-------yz', /^k8s-a-x-[0-9a-z]{10}$/],
    ['digits only', '12345678901', '2024', /^k8s-12345678-2024-[0-9a-z]{10}$/],
    [
      'characters AWS does not allow (upper case, dots, underscores)',
      'Team_A.prod',
      'My_Svc.v2',
      /^k8s-teamapro-mysvcv2-[0-9a-z]{10}$/,
    ],
    ['an empty namespace', '', 'web', /^k8s-web-[0-9a-z]{10}$/],
    [
      'a name that starts like "internal-"',
      'internal-tools',
      'internal-api',
      /^k8s-internal-internal-[0-9a-z]{10}$/,
    ],
  ])('%s give valid names of at most 32 characters', (_case, namespace, name, shape) => {
    const svc = service(namespace, name);
    const names = [
      ...(['internal', 'internet-facing'] as const).map((scheme) =>
        loadBalancerName('c1', svc, scheme),
      ),
      targetGroupName('c1', svc, '80', 'TCP', 30080),
      targetGroupName('a-much-longer-cluster-name-than-usual', svc, '65535', 'TCP_UDP', 32767),
    ];
    for (const elbName of names) {
      expect(elbName).toMatch(shape);
      expect(elbName.length).toBeLessThanOrEqual(32);
      expect(elbName).toMatch(awsNameRule);
      expect(elbName.startsWith('internal-')).toBe(false);
      expect(isValidElbName(elbName)).toBe(true);
    }
  });

  it('is deterministic', () => {
    expect(loadBalancerName('c1', service('default', 'web'), 'internal')).toBe(
      loadBalancerName('c1', service('default', 'web'), 'internal'),
    );
    expect(targetGroupName('c1', service('default', 'web'), '80', 'TCP', 30080)).toBe(
      targetGroupName('c1', service('default', 'web'), '80', 'TCP', 30080),
    );
  });

  // The namespaces and names share their first 8 characters, so only the hash can tell them apart.
  const base = { cluster: 'c1', namespace: 'team-alpha-prod', name: 'frontend-web', uid: 'uid-1' };
  it.each<[string, Partial<typeof base>, Scheme]>([
    ['cluster', { cluster: 'c2' }, 'internal'],
    ['namespace', { namespace: 'team-alpha-staging' }, 'internal'],
    ['name', { name: 'frontend-worker' }, 'internal'],
    ['UID (the Service was re-created)', { uid: 'uid-2' }, 'internal'],
    ['scheme', {}, 'internet-facing'],
  ])('load balancer names differ when the %s differs', (_field, change, scheme) => {
    const name = (fields: typeof base, s: Scheme) =>
      loadBalancerName(fields.cluster, service(fields.namespace, fields.name, fields.uid), s);
    expect(name({ ...base, ...change }, scheme)).not.toBe(name(base, 'internal'));
  });

  it.each<[string, Partial<typeof base>]>([
    ['cluster', { cluster: 'c2' }],
    ['namespace', { namespace: 'team-alpha-staging' }],
    ['name', { name: 'frontend-worker' }],
    ['UID', { uid: 'uid-2' }],
  ])('target group names differ when the %s differs', (_field, change) => {
    const name = (fields: typeof base) =>
      targetGroupName(
        fields.cluster,
        service(fields.namespace, fields.name, fields.uid),
        '80',
        'TCP',
        30080,
      );
    expect(name({ ...base, ...change })).not.toBe(name(base));
  });

  it.each<[string, string, string, number]>([
    ['service port', '443', 'TCP', 30080],
    ['protocol', '80', 'TLS', 30080],
    ['protocol (TCP_UDP)', '80', 'TCP_UDP', 30080],
    ['nodePort', '80', 'TCP', 30081],
  ])('target group names differ by %s', (_field, key, protocol, nodePort) => {
    const svc = service('default', 'web');
    expect(targetGroupName('c1', svc, key, protocol, nodePort)).not.toBe(
      targetGroupName('c1', svc, '80', 'TCP', 30080),
    );
  });
});

/** The hash part of a name as the naming scheme defines it, computed here with node:crypto. */
function sha256Hash(parts: readonly (string | number)[]): string {
  const digest = createHash('sha256')
    .update(canonicalJson(parts.map(String)), 'utf8')
    .digest();
  return (digest.readBigUInt64BE(0) % 36n ** 10n).toString(36).padStart(10, '0');
}

describe('the hash in names', () => {
  const svc = makeService({ namespace: 'team-a', name: 'web', uid: 'uid-1' });

  it('hashes the UTF-8 bytes of any text, as node:crypto does (the name of a resource must never change)', () => {
    // Non-ASCII and long inputs cross the digest's multi-byte and padding-block boundaries.
    const wide = makeService({ namespace: 'ns', name: 'web', uid: `ü-€-𝄞-${'x'.repeat(120)}` });
    expect(loadBalancerName('clüster', wide, 'internal')).toBe(
      `k8s-ns-web-${sha256Hash(['clüster', 'ns', 'web', `ü-€-𝄞-${'x'.repeat(120)}`, 'internal'])}`,
    );
  });

  it('is SHA-256 of cluster, namespace, name and UID (and port fields), in base 36: about 52 bits', () => {
    expect(loadBalancerName('c1', svc, 'internal')).toBe(
      `k8s-team-a-web-${sha256Hash(['c1', 'team-a', 'web', 'uid-1', 'internal'])}`,
    );
    expect(targetGroupName('c1', svc, '80', 'TCP', 30080)).toBe(
      `k8s-team-a-web-${sha256Hash(['c1', 'team-a', 'web', 'uid-1', '80', 'TCP', 30080])}`,
    );
    expect(securityGroupName('c1', svc)).toBe(
      `k8s-team-a-web-${sha256Hash(['c1', 'team-a', 'web', 'uid-1'])}`,
    );
  });

  // Resources of Services created before the switch keep their names (naming version 1):
  // renaming them would replace every target group and orphan nothing only by luck.
  it('keeps the 40-bit names of naming version 1 for resources made before SHA-256', () => {
    const legacy = (parts: readonly (string | number)[]) =>
      stableHash(parts.map(String)).slice(0, 10);
    expect(loadBalancerName('c1', svc, 'internal', 1)).toBe(
      `k8s-team-a-web-${legacy(['c1', 'team-a', 'web', 'uid-1', 'internal'])}`,
    );
    expect(targetGroupName('c1', svc, '80', 'TCP', 30080, 1)).toBe(
      `k8s-team-a-web-${legacy(['c1', 'team-a', 'web', 'uid-1', '80', 'TCP', 30080])}`,
    );
    expect(securityGroupName('c1', svc, 1)).toBe(
      `k8s-team-a-web-${legacy(['c1', 'team-a', 'web', 'uid-1'])}`,
    );
  });
});

describe('isValidElbName', () => {
  it.each<[string, string]>([
    ['32 characters', 'a'.repeat(32)],
    ['letters, digits and inner hyphens', 'k8s-Default-web-0123456789'],
    ['a single character', 'a'],
    ['"internal" without the hyphen', 'internalapi'],
  ])('accepts %s', (_case, name) => {
    expect(isValidElbName(name)).toBe(true);
  });

  it.each<[string, string]>([
    ['33 characters', 'a'.repeat(33)],
    ['an empty name', ''],
    ['a leading hyphen', '-k8s-web'],
    ['a trailing hyphen', 'k8s-web-'],
    ['the "internal-" prefix', 'internal-web'],
    ['an underscore', 'k8s_web'],
    ['a dot', 'k8s.web'],
    ['a space', 'k8s web'],
    ['a non-ASCII letter', 'k8s-wéb'],
  ])('rejects %s', (_case, name) => {
    expect(isValidElbName(name)).toBe(false);
  });
});

describe('ownershipOf', () => {
  const svc = makeService({ namespace: 'default', name: 'web', uid: 'uid-1' });
  const tags = (cluster: string | undefined, uid: string | undefined): Record<string, string> => ({
    ...(cluster === undefined ? {} : { [ownershipTags.cluster]: cluster }),
    ...(uid === undefined ? {} : { [ownershipTags.serviceUid]: uid }),
    [ownershipTags.service]: 'default/web',
  });

  it.each<[string, Record<string, string>, 'ours' | 'foreign']>([
    ['cluster and UID match', tags('c1', 'uid-1'), 'ours'],
    ['another cluster', tags('c2', 'uid-1'), 'foreign'],
    ['another UID (an earlier Service of the same name)', tags('c1', 'uid-0'), 'foreign'],
    ['no cluster tag', tags(undefined, 'uid-1'), 'foreign'],
    ['no UID tag', tags('c1', undefined), 'foreign'],
    ['no tags at all', {}, 'foreign'],
    [
      'only the kubernetes.io/cluster tag and a matching service tag',
      { 'kubernetes.io/cluster/c1': 'owned', [ownershipTags.service]: 'default/web' },
      'foreign',
    ],
  ])('%s → %s', (_case, resourceTagSet, expected) => {
    expect(ownershipOf(resourceTagSet, 'c1', svc)).toBe(expected);
  });

  it('recognises the tags resourceTags puts on our resources', () => {
    const applied = resourceTags('c1', svc, 'load-balancer', { team: 'web' });
    expect(ownershipOf(applied, 'c1', svc)).toBe('ours');
    expect(ownershipOf(applied, 'c2', svc)).toBe('foreign');
    expect(ownershipOf(applied, 'c1', makeService({ uid: 'uid-2' }))).toBe('foreign');
  });
});
