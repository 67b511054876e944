import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeRecord,
  dictionaryV1Bytes,
  encodeRecord,
} from '../../../functions/state/record-codec';
import type { ServiceRecord } from '../../../functions/sync/ports';
import { release01State } from '../../fixtures/release-0.1/load-fixtures';

/** A record release 0.1 wrote for a two-port Service (its JSON, as the fixtures keep it). */
function twoPortRecord(): ServiceRecord {
  const item = release01State().items.find((i) => i.rec?.S !== undefined);
  return JSON.parse(item?.rec?.S ?? '{}') as ServiceRecord;
}

describe('record codec', () => {
  it('returns the record it was given', () => {
    const record = twoPortRecord();
    expect(decodeRecord(encodeRecord(record))).toEqual(record);
  });

  it('stores a two-port Service’s record in under half a KB, about a sixth of its JSON', () => {
    const record = twoPortRecord();
    const json = Buffer.byteLength(JSON.stringify(record));
    const stored = encodeRecord(record).byteLength;
    expect(json).toBeGreaterThan(2000);
    expect(stored).toBeLessThan(512);
  });

  it('refuses a format it does not know, naming it', () => {
    const stored = encodeRecord(twoPortRecord());
    stored[0] = 7;
    expect(() => decodeRecord(stored)).toThrow(/format 7, which this release cannot read/);
  });

  it('keeps format 1’s dictionary as released: stored records depend on every byte of it', () => {
    // Changing it makes every record written with it unreadable: add a format byte instead.
    expect(createHash('sha256').update(dictionaryV1Bytes).digest('hex')).toBe(
      'a3be5558939920078a108052be74ba8e9e6245838870eb4bc7158c9b7ae94715',
    );
  });

  it('reads a record stored in format 1 as released (bytes written by this codec when it shipped)', () => {
    const stored = Buffer.from(
      'AatGK9HLU5PgRXNpZoquIeGSHaIFuXCHGoZmEFIpjb2cQ5TdeEprlLLUwqA2Fr1IITunGBoZm5iamVtYGhga4c8p5alJugZw5foIZmJSckpqGsinKMGcDApFrPFjhBY/tQA=',
      'base64',
    );
    expect(decodeRecord(stored)).toEqual({
      key: 'default/web',
      uid: 'uid-1',
      snapshot: {
        metadata: { name: 'web', namespace: 'default', uid: 'uid-1' },
        spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] },
      },
      provider: {
        loadBalancerArn:
          'arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/k8s-default-web-0123456789/0123456789abcdef',
      },
      checkpoint: 'c1',
      updatedAt: '2026-12-02T00:00:00.000Z',
    });
  });
});
