import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildForwarder, forwarderBundleLimitBytes } from '../../functions/forwarder/build';
import { forwarderConfigSchema } from '../../functions/forwarder/config';
import { findForwarderOutputs } from '../../functions/local/k8s-render';

const read = (path: string) => readFileSync(path, 'utf8');
type Manifest = { kind: string; metadata: { name: string }; [key: string]: unknown };
const manifests = (path: string) => loadAllYaml(read(path)) as Manifest[];

describe('forwarder manifests (infra/k8s)', () => {
  it('kustomize lists every manifest and generates the configuration from the shared JSON', () => {
    const kustomization = manifests('infra/k8s/kustomization.yaml')[0] as unknown as {
      resources: string[];
      configMapGenerator: { name: string; files: string[] }[];
    };
    expect(kustomization.resources.sort()).toEqual([
      'controller-rbac.yaml',
      'deployment.yaml',
      'namespace.yaml',
      'rbac.yaml',
      'serviceaccount.yaml',
    ]);
    expect(kustomization.configMapGenerator).toEqual([
      { name: 'forwarder-config', files: ['config/controller.json'] },
      // The bundle k8s render (or npm run k8s:configure) writes, as the file the Deployment runs.
      { name: 'forwarder-code', files: ['main.mjs=code/forwarder.mjs'] },
    ]);
  });

  it('runs the bundle from its ConfigMap on a multi-arch Node image pinned by digest, on amd64 and arm64 Linux nodes', () => {
    const [kustomization] = manifests('infra/k8s/kustomization.yaml') as unknown as {
      images: { name: string; newName: string; digest?: string; newTag?: string }[];
    }[];
    const image = kustomization?.images.find((i) => i.name === 'forwarder');
    expect(image?.newName).toBe('gcr.io/distroless/nodejs24-debian12');
    expect(image?.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(image?.newTag).toBeUndefined();
    // The Dockerfile of the own-image option starts from the same pinned base.
    expect(read('functions/forwarder/Dockerfile')).toContain(
      `FROM ${image?.newName ?? ''}:nonroot@${image?.digest ?? ''}`,
    );
    const [deployment] = manifests('infra/k8s/deployment.yaml') as unknown as {
      spec: {
        template: {
          spec: {
            affinity: unknown;
            volumes: { name: string; configMap?: { name: string } }[];
            containers: {
              image: string;
              command?: string[];
              args: string[];
              volumeMounts: { name: string; mountPath: string; readOnly: boolean }[];
            }[];
          };
        };
      };
    }[];
    const pod = deployment!.spec.template.spec;
    const container = pod.containers[0]!;
    expect(container.image).toBe('forwarder');
    // The image's own entrypoint (node) runs the mounted file.
    expect(container.command).toBeUndefined();
    expect(container.args).toEqual(['/forwarder/main.mjs']);
    expect(container.volumeMounts).toContainEqual({
      name: 'code',
      mountPath: '/forwarder',
      readOnly: true,
    });
    expect(pod.volumes).toContainEqual({ name: 'code', configMap: { name: 'forwarder-code' } });
    expect(JSON.stringify(pod.affinity)).toContain(
      '{"key":"kubernetes.io/arch","operator":"In","values":["amd64","arm64"]}',
    );
  });

  // kubectl's own kustomize renders what `kubectl apply --server-side -k` would send.
  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  it.skipIf(kubectl.status !== 0)(
    'kubectl kustomize renders the pinned image and a content-named code ConfigMap the Deployment mounts',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'k8s-render-'));
      cpSync('infra/k8s', dir, { recursive: true, filter: (src) => !src.includes('/code') });
      await buildForwarder(join(dir, 'code', 'forwarder.mjs'));
      const rendered = spawnSync('kubectl', ['kustomize', dir], {
        encoding: 'utf8',
        maxBuffer: 16 * 1024 * 1024,
      });
      expect(rendered.status, rendered.stderr).toBe(0);
      const objects = loadAllYaml(rendered.stdout) as {
        kind: string;
        metadata: { name: string };
        data?: Record<string, string>;
        spec?: {
          template: {
            spec: { containers: { image: string }[]; volumes: { configMap?: { name: string } }[] };
          };
        };
      }[];
      const code = objects.find(
        (o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('forwarder-code-'),
      );
      expect(code?.data?.['main.mjs']).toBe(
        readFileSync(join(dir, 'code', 'forwarder.mjs'), 'utf8'),
      );
      const pod = objects.find((o) => o.kind === 'Deployment')?.spec?.template.spec;
      expect(pod?.containers[0]?.image).toMatch(
        /^gcr\.io\/distroless\/nodejs24-debian12@sha256:[0-9a-f]{64}$/,
      );
      expect(pod?.volumes.map((v) => v.configMap?.name)).toContain(code?.metadata.name);
    },
    60_000,
  );

  it('the bundle fits a ConfigMap (1 MiB) with room to spare, and carries no client-node', async () => {
    const outfile = join(mkdtempSync(join(tmpdir(), 'fwd-bundle-')), 'forwarder.mjs');
    await buildForwarder(outfile);
    const code = readFileSync(outfile, 'utf8');
    expect(Buffer.byteLength(code)).toBeLessThan(forwarderBundleLimitBytes);
    expect(code).not.toContain('@kubernetes/client-node');
    expect(code).toContain('"InClusterConnection"');
  }, 60_000);

  it('the shipped configuration example is valid forwarder configuration', () => {
    expect(() =>
      forwarderConfigSchema.parse(JSON.parse(read('infra/k8s/config/controller.json'))),
    ).not.toThrow();
  });

  it('grants only list and watch on services, nodes and endpointslices', () => {
    const [role] = manifests('infra/k8s/rbac.yaml').filter(
      (m) => m.kind === 'ClusterRole',
    ) as unknown as {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    }[];
    expect(role?.rules).toEqual([
      { apiGroups: [''], resources: ['services', 'nodes'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
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

  it('the own-image option is multi-stage, runs as a non-root user, and puts the bundle where the Deployment runs it', () => {
    const dockerfile = read('functions/forwarder/Dockerfile');
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    // The bundle is plain JavaScript: built once on the build machine's platform for every target.
    expect(dockerfile).toMatch(/^FROM --platform=\$BUILDPLATFORM /m);
    expect(dockerfile).toMatch(/^USER 65532:65532$/m);
    expect(dockerfile).toMatch(/^COPY --from=build \/out\/main\.mjs \/forwarder\/main\.mjs$/m);
  });
});

describe('the stack outputs the forwarder is configured from (k8s render, k8s:configure)', () => {
  const config = JSON.stringify({ clusterName: 'demo', region: 'eu-west-1' });
  const outputs = {
    'ServerlessServiceController-demo': { ForwarderConfig: config, WorkQueueUrl: 'https://q' },
    Platform: {
      BlueForwarderConfig0A1B2C3D: config,
      BlueForwarderImageUri9F8E7D6C: 'repo:blue',
      GreenForwarderConfig0A1B2C3D: config,
    },
  };

  it('chooses by stack, or by stack and output among several constructs in one stack', () => {
    expect(findForwarderOutputs(outputs, { stack: 'ServerlessServiceController-demo' })).toEqual({
      stack: 'ServerlessServiceController-demo',
      key: 'ForwarderConfig',
      config,
    });
    // The image output of the same construct only: Green built none.
    expect(
      findForwarderOutputs(outputs, { stack: 'Platform.BlueForwarderConfig0A1B2C3D' }),
    ).toEqual({
      stack: 'Platform',
      key: 'BlueForwarderConfig0A1B2C3D',
      config,
      image: 'repo:blue',
    });
    expect(
      findForwarderOutputs(outputs, { stack: 'Platform.GreenForwarderConfig0A1B2C3D' }).image,
    ).toBeUndefined();
  });

  it('names every candidate when it cannot choose', () => {
    expect(() => findForwarderOutputs(outputs)).toThrow(
      'found 3 (ServerlessServiceController-demo.ForwarderConfig, Platform.BlueForwarderConfig0A1B2C3D, Platform.GreenForwarderConfig0A1B2C3D): choose one with --stack',
    );
    expect(() => findForwarderOutputs(outputs, { stack: 'Platform' })).toThrow(/found 2 /);
    expect(() => findForwarderOutputs(outputs, { stack: 'Platform.Blue' })).toThrow(
      /--stack Platform\.Blue: no serverless-service-controller outputs there; the file has /,
    );
    expect(() => findForwarderOutputs({ Other: { WorkQueueUrl: 'x' } })).toThrow(/found 0: /);
  });
});
