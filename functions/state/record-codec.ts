import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { ServiceRecord } from '../sync/ports';

/**
 * How a Service's record is stored in its state item (`recz`): one format byte, then the record's
 * JSON compressed with raw DEFLATE against a preset dictionary.
 *
 * Why: DynamoDB bills a write per started KB of the item. A record of a two-port Service is about
 * 2.4 KB of JSON (3 write units a write), most of it the same keys, ARN prefixes and tag keys in
 * every record; the dictionary holds those, so the same record stores in about 400 bytes and the
 * whole item stays under 1 KB (1 unit). Raw DEFLATE (node:zlib) is used because it takes a preset
 * dictionary; it compresses a record in a fraction of a millisecond.
 *
 * The dictionary of a format byte can never change once released (stored records name it): a
 * better one gets a new format byte, read by one release before another writes it (so a rollback
 * can read it), and readers keep every older one. test/unit/aws/record-codec.test.ts pins it.
 */
const formatDictionaryV1 = 1;

/** Text every record shares, laid out as a record is, so back-references find it. */
const dictionaryV1 = Buffer.from(
  JSON.stringify({
    key: 'default/',
    uid: '',
    snapshot: {
      metadata: {
        name: '',
        namespace: '',
        uid: '',
        annotations: { 'service.beta.kubernetes.io/aws-load-balancer-': '' },
      },
      spec: {
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, nodePort: 30000 },
          { name: 'https', port: 443, protocol: 'TCP', targetPort: 8443, nodePort: 30000 },
        ],
        selector: { app: '' },
        type: 'LoadBalancer',
        sessionAffinity: 'None',
        clusterIP: '',
        clusterIPs: [''],
        ipFamilies: ['IPv4'],
        ipFamilyPolicy: 'SingleStack',
        externalTrafficPolicy: 'Cluster',
        allocateLoadBalancerNodePorts: true,
        loadBalancerClass: '',
      },
    },
    provider: {
      subnets: {
        inputs: '["internal",null]',
        refs: [{ subnetId: 'subnet-', availabilityZone: 'us-east-1a' }],
      },
      namingVersion: 2,
      targetGroups: {
        '80': {
          arn: 'arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/k8s-default-',
          name: 'k8s-default-',
          targets: ['i-'],
        },
      },
      securityGroupId: 'sg-',
      loadBalancerArn:
        'arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/net/k8s-default-',
      loadBalancerName: 'k8s-default-',
      dnsName: '.elb.us-east-1.amazonaws.com',
      appliedTagKeys: [
        'kubernetes.io/cluster/',
        'serverless-service-controller.io/cluster',
        'serverless-service-controller.io/resource',
        'serverless-service-controller.io/service',
        'serverless-service-controller.io/service-uid',
      ],
    },
    status: { ingress: [{ hostname: '' }] },
    hostsHash: '',
    announced: { shape: '', loadBalancerId: 'arn:aws:elasticloadbalancing:', instances: ['i-'] },
    updatedAt: '2026-12-01T00:00:00.000Z',
    checkpoint: '',
  }),
);

/** The stored form of a record (the `recz` attribute). */
export function encodeRecord(record: ServiceRecord): Uint8Array {
  const json = Buffer.from(JSON.stringify(record));
  const packed = deflateRawSync(json, { level: 9, dictionary: dictionaryV1 });
  return Buffer.concat([Buffer.of(formatDictionaryV1), packed]);
}

/** A record from its stored form; throws on a format this release does not know. */
export function decodeRecord(stored: Uint8Array): ServiceRecord {
  const format = stored[0];
  if (format !== formatDictionaryV1) {
    throw new Error(`state record in format ${String(format)}, which this release cannot read`);
  }
  const json = inflateRawSync(stored.subarray(1), { dictionary: dictionaryV1 });
  return JSON.parse(json.toString('utf8')) as ServiceRecord;
}

/** The dictionary's SHA-256, for the test that keeps it from changing. */
export const dictionaryV1Bytes: Uint8Array = dictionaryV1;
