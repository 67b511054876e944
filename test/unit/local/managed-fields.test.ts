import { describe, expect, it, vi } from 'vitest';
import type { JsonObject } from '../../../functions/local/fake-kube/patches';
import {
  ApplyConflictError,
  applyConfig,
  recordUpdate,
} from '../../../functions/local/fake-kube/managed-fields';

const now = '2026-01-01T00:00:00Z';
const service = (ports: JsonObject[], extra: JsonObject = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'default', ...extra } as JsonObject,
  spec: { type: 'LoadBalancer', ports } as JsonObject,
});
const owners = (object: { metadata: Record<string, unknown> }) =>
  (object.metadata.managedFields as { manager: string; operation: string }[] | undefined)?.map(
    (entry) => `${entry.manager}/${entry.operation}`,
  ) ?? [];

describe('field ownership', () => {
  it('a create owns what it sent, not what the server filled in', () => {
    const sent = service([{ port: 80 }]);
    const stored = {
      ...structuredClone(sent),
      spec: { ...sent.spec, clusterIP: '10.96.0.1' } as JsonObject,
    };
    recordUpdate(undefined, stored, 'kubectl-create', now, sent);
    const fields = JSON.stringify(stored.metadata.managedFields);
    expect(fields).toContain('"f:type":{}');
    expect(fields).toContain('"k:{\\"port\\":80,\\"protocol\\":\\"TCP\\"}"');
    expect(fields).not.toContain('clusterIP');
  });

  it('an apply that agrees with another manager shares the field instead of conflicting', () => {
    const created = service([{ port: 80, targetPort: 8080 }]);
    recordUpdate(undefined, created, 'kubectl-create', now, created);
    const applied = applyConfig(
      created,
      service([{ port: 80, targetPort: 8080 }]),
      'ci',
      false,
      now,
    );
    expect(owners(applied)).toEqual(['kubectl-create/Update', 'ci/Apply']);
  });

  it('refuses a disagreeing field, names it, and takes it over when forced', () => {
    const created = service([{ port: 80, targetPort: 8080 }]);
    recordUpdate(undefined, created, 'kubectl-create', now, created);
    const wanted = service([{ port: 80, targetPort: 9090 }]);
    expect(() => applyConfig(created, wanted, 'ci', false, now)).toThrow(ApplyConflictError);
    expect(() => applyConfig(created, wanted, 'ci', false, now)).toThrow(
      'conflict with "kubectl-create": .spec.ports[port=80,protocol="TCP"].targetPort',
    );
    const forced = applyConfig(created, wanted, 'ci', true, now);
    expect(forced.spec).toMatchObject({ ports: [{ port: 80, targetPort: 9090 }] });
    expect(JSON.stringify(forced.metadata.managedFields)).toMatch(
      /"manager":"kubectl-create".*"f:type".*"manager":"ci"/,
    );
  });

  it('a port another manager added stays when an apply does not mention it; one it applied before goes', () => {
    const first = applyConfig(undefined, service([{ port: 80 }, { port: 81 }]), 'ci', false, now);
    const added = structuredClone(first);
    (added.spec as { ports: JsonObject[] }).ports.push({ port: 443, protocol: 'TCP' });
    recordUpdate(first, added, 'platform-bot', now);
    const next = applyConfig(added, service([{ port: 80 }]), 'ci', false, now);
    expect((next.spec as { ports: { port: number }[] }).ports.map((p) => p.port)).toEqual([
      80, 443,
    ]);
  });
});

describe('writes that change nothing', () => {
  it('keep the resourceVersion: a replace sending managedFields back altered, the same apply again later', async () => {
    const { ObjectStore } = await import('../../../functions/local/fake-kube/store');
    const store = new ObjectStore();
    const created = store.create('services', 'default', service([{ port: 80 }]), 'kubectl-create');
    const fields = created.metadata.managedFields as JsonObject[];
    // What a client that turned times into Dates and back sends.
    const sentBack = {
      ...created,
      metadata: {
        ...created.metadata,
        managedFields: fields.map((entry) => ({ ...entry, time: '2026-01-01T00:00:00.000Z' })),
      },
    };
    const replaced = store.update('services', 'default', 'web', sentBack, undefined, 'node-fetch');
    expect(replaced.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
    const applied = store.apply('services', 'default', 'web', service([{ port: 80 }]), 'ci', false);
    vi.useFakeTimers({ now: Date.now() + 5_000 });
    try {
      const again = store.apply('services', 'default', 'web', service([{ port: 80 }]), 'ci', false);
      expect(again.metadata.resourceVersion).toBe(applied.metadata.resourceVersion);
    } finally {
      vi.useRealTimers();
    }
  });
});
