import { Writer } from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { decodeProtobufBody } from '../../../functions/local/fake-kube/protobuf';

/**
 * Bodies written field by field with protobufjs's Writer, numbered as Kubernetes' generated.proto
 * files number them (not through the decoder's own table), wrapped as the API server expects.
 */
function envelope(kind: string, raw: Uint8Array): Buffer {
  const typeMeta = Writer.create().uint32(10).string('v1').uint32(18).string(kind).finish();
  const unknown = Writer.create().uint32(10).bytes(typeMeta).uint32(18).bytes(raw).finish();
  return Buffer.concat([Buffer.from('k8s\0', 'latin1'), unknown]);
}

describe('protobuf request bodies', () => {
  it('reads a Node: metadata (labels, creation time), spec.providerID and taints, status conditions', async () => {
    const time = Writer.create().uint32(8).int64(1_700_000_000).finish();
    const label = Writer.create().uint32(10).string('team').uint32(18).string('a').finish();
    const metadata = Writer.create()
      .uint32(10)
      .string('node-1') // name = 1
      .uint32(66)
      .bytes(time) // creationTimestamp = 8
      .uint32(90)
      .bytes(label) // labels = 11
      .finish();
    const taint = Writer.create()
      .uint32(10)
      .string('dedicated')
      .uint32(26)
      .string('NoSchedule')
      .finish();
    const spec = Writer.create()
      .uint32(26)
      .string('aws:///us-east-1a/i-0123') // providerID = 3
      .uint32(32)
      .bool(true) // unschedulable = 4
      .uint32(42)
      .bytes(taint) // taints = 5
      .finish();
    const condition = Writer.create().uint32(10).string('Ready').uint32(18).string('True').finish();
    const status = Writer.create().uint32(34).bytes(condition).finish(); // conditions = 4
    const node = Writer.create()
      .uint32(10)
      .bytes(metadata)
      .uint32(18)
      .bytes(spec)
      .uint32(26)
      .bytes(status)
      .finish();
    expect(await decodeProtobufBody('nodes', envelope('Node', node))).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: 'node-1',
        creationTimestamp: '2023-11-14T22:13:20Z',
        labels: { team: 'a' },
      },
      spec: {
        providerID: 'aws:///us-east-1a/i-0123',
        unschedulable: true,
        taints: [{ key: 'dedicated', effect: 'NoSchedule' }],
      },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  });

  it('keeps a pointer field sent as false, and takes a plain field sent empty for unset', async () => {
    const spec = Writer.create()
      .uint32(26)
      .string('') // clusterIP = 3, a plain string: "" is unset
      .uint32(160)
      .bool(false) // allocateLoadBalancerNodePorts = 20, a *bool: false is a value
      .finish();
    const metadata = Writer.create().uint32(10).string('web').finish();
    const service = Writer.create().uint32(10).bytes(metadata).uint32(18).bytes(spec).finish();
    const decoded = await decodeProtobufBody('services', envelope('Service', service));
    expect(decoded).toMatchObject({ spec: { allocateLoadBalancerNodePorts: false } });
    expect(JSON.stringify(decoded)).not.toContain('clusterIP');
  });

  it('reads int-or-string target ports both ways', async () => {
    const asNumber = Writer.create().uint32(8).int64(0).uint32(16).int32(8443).finish();
    const asName = Writer.create().uint32(8).int64(1).uint32(26).string('http').finish();
    const port = (targetPort: Uint8Array) =>
      Writer.create().uint32(24).int32(443).uint32(34).bytes(targetPort).finish();
    const spec = Writer.create()
      .uint32(10)
      .bytes(port(asNumber))
      .uint32(10)
      .bytes(port(asName))
      .uint32(34)
      .string('LoadBalancer') // type = 4
      .finish();
    const metadata = Writer.create().uint32(10).string('web').finish();
    const service = Writer.create().uint32(10).bytes(metadata).uint32(18).bytes(spec).finish();
    expect(await decodeProtobufBody('services', envelope('Service', service))).toMatchObject({
      spec: {
        type: 'LoadBalancer',
        ports: [
          { port: 443, targetPort: 8443 },
          { port: 443, targetPort: 'http' },
        ],
      },
    });
  });

  it('refuses a body of another kind, one without the prefix, and kinds it does not read', async () => {
    const metadata = Writer.create().uint32(10).string('x').finish();
    const body = Writer.create().uint32(10).bytes(metadata).finish();
    await expect(decodeProtobufBody('services', envelope('Node', body))).rejects.toThrow(
      'the protobuf body holds a Node, not a Service',
    );
    await expect(decodeProtobufBody('services', Buffer.from(body))).rejects.toThrow(
      'k8s\\0 prefix',
    );
    await expect(decodeProtobufBody('events', envelope('Event', body))).rejects.toThrow(
      'send events as application/json',
    );
  });
});
