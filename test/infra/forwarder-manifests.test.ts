import { readFileSync } from 'node:fs';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { forwarderConfigSchema } from '../../functions/forwarder/config';

const read = (path: string) => readFileSync(path, 'utf8');
type Manifest = { kind: string; metadata: { name: string }; [key: string]: unknown };
const manifests = (path: string) => loadAllYaml(read(path)) as Manifest[];

describe('forwarder manifests (infra/k8s)', () => {
  it('kustomize lists every manifest and generates the configuration from the shared JSON', () => {
    const kustomization = manifests('infra/k8s/kustomization.yaml')[0] as unknown as {
      resources: string[];
      configMapGenerator: { files: string[] }[];
    };
    expect(kustomization.resources.sort()).toEqual([
      'controller-rbac.yaml',
      'deployment.yaml',
      'namespace.yaml',
      'rbac.yaml',
      'serviceaccount.yaml',
    ]);
    expect(kustomization.configMapGenerator[0]?.files).toEqual(['config/controller.json']);
  });

  it('the shipped configuration example is valid forwarder configuration', () => {
    expect(() =>
      forwarderConfigSchema.parse(JSON.parse(read('infra/k8s/config/controller.json'))),
    ).not.toThrow();
  });

  it('grants only list and watch on services and nodes', () => {
    const [role] = manifests('infra/k8s/rbac.yaml').filter(
      (m) => m.kind === 'ClusterRole',
    ) as unknown as {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    }[];
    expect(role?.rules).toEqual([
      { apiGroups: [''], resources: ['services', 'nodes'], verbs: ['list', 'watch'] },
    ]);
  });

  it('runs restricted: non-root, read-only root, no privilege escalation, all capabilities dropped, with probes and limits', () => {
    const [deployment] = manifests('infra/k8s/deployment.yaml') as unknown as {
      spec: {
        template: {
          spec: {
            terminationGracePeriodSeconds: number;
            securityContext: { runAsNonRoot: boolean; seccompProfile: { type: string } };
            containers: {
              securityContext: {
                allowPrivilegeEscalation: boolean;
                readOnlyRootFilesystem: boolean;
                capabilities: { drop: string[] };
              };
              readinessProbe: { httpGet: { path: string } };
              livenessProbe: { httpGet: { path: string } };
              resources: { limits: { memory: string } };
            }[];
          };
        };
      };
    }[];
    const pod = deployment!.spec.template.spec;
    const container = pod.containers[0]!;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container.resources.limits.memory).toBeDefined();
    // Longer than the forwarder's own 20 s flush on SIGTERM.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(20);
  });

  it('the image is multi-stage and runs as a non-root user', () => {
    const dockerfile = read('functions/forwarder/Dockerfile');
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/^USER 65532:65532$/m);
    expect(dockerfile).toMatch(/COPY --from=build \/out\/main\.mjs/);
  });
});
