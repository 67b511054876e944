import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
// CI installs kubectl (.ci/run) and sets this, so a missing kubectl fails there instead of skipping.
if (process.env.REQUIRE_KUBECTL === '1' && !hasKubectl) {
  throw new Error('REQUIRE_KUBECTL is set but kubectl is not on PATH');
}

/** `npm start` prints the simulated cluster's kubeconfig for kubectl; this is what kubectl can do with it. */
describe.skipIf(!hasKubectl)(
  'kubectl against the fake API server (skipped without kubectl)',
  () => {
    let kube: FakeKubeApiServer;
    let kubeconfig: string;
    const dir = mkdtempSync(join(tmpdir(), 'kubectl-'));
    // Asynchronous: the fake API server answers from this same process.
    const kubectl = (...args: string[]) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], (error, stdout, stderr) =>
          resolve({ status: error ? 1 : 0, stdout, stderr }),
        );
      });

    beforeAll(async () => {
      kube = await FakeKubeApiServer.start();
      kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(kubeconfig, kube.kubeconfigText());
      kube.store.create('nodes', '', { metadata: { name: 'node-1' }, spec: {} });
    });
    afterAll(() => kube.stop());

    it('gets, creates, patches and deletes Services, and lists nodes', async () => {
      const file = join(dir, 'web.json');
      writeFileSync(
        file,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'web', namespace: 'default' },
          spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
        }),
      );
      // No OpenAPI document is served, so client-side validation is off.
      const created = await kubectl('create', '--validate=false', '-f', file);
      expect(created.stdout, created.stderr).toContain('service/web created');
      expect((await kubectl('get', 'svc', '-A')).stdout).toMatch(/default +web/);
      expect((await kubectl('get', 'nodes')).stdout).toContain('node-1');
      const labels = '{"metadata":{"labels":{"team":"a"}}}';
      const patched = await kubectl('patch', 'service', 'web', '--type', 'merge', '-p', labels);
      expect(patched.status, patched.stderr).toBe(0);
      expect(JSON.stringify(kube.store.get('services', 'default', 'web'))).toContain('"team":"a"');
      expect((await kubectl('delete', 'service', 'web')).stdout).toContain('deleted');
      expect(kube.store.list('services')).toEqual([]);
    });

    /** A LoadBalancer Service straight into the store, with an address once it has one. */
    const loadBalancer = (name: string, hostname?: string) => {
      const created = kube.store.create('services', 'default', {
        metadata: { name, namespace: 'default' },
        spec: {
          type: 'LoadBalancer',
          selector: { app: name },
          ports: [{ name: 'http', port: 80, targetPort: 8080 }],
        },
      });
      if (hostname === undefined) return created;
      return kube.store.update(
        'services',
        'default',
        name,
        { ...created, status: { loadBalancer: { ingress: [{ hostname }] } } },
        'status',
      );
    };
    const event = (service: string, uid: string, reason: string, type: string) =>
      kube.store.create('events', 'default', {
        metadata: { name: `${service}.${reason}`, namespace: 'default' },
        involvedObject: { kind: 'Service', namespace: 'default', name: service, uid },
        reason,
        message: `${reason} for ${service}`,
        type,
        source: { component: 'service-controller' },
        count: 1,
        firstTimestamp: new Date().toISOString(),
        lastTimestamp: new Date().toISOString(),
      });

    it('get prints the columns a real server prints, and -o wide the wide ones', async () => {
      loadBalancer('listed', 'listed.elb.example');
      loadBalancer('waiting');
      const services = await kubectl('get', 'svc', '-A');
      expect(services.stdout, services.stderr).toMatch(
        /^NAMESPACE +NAME +TYPE +CLUSTER-IP +EXTERNAL-IP +PORT\(S\) +AGE$/m,
      );
      expect(services.stdout).toMatch(
        /^default +listed +LoadBalancer +10\.96\.\d+\.\d+ +listed\.elb\.example +80:3\d{4}\/TCP +\d+s$/m,
      );
      expect(services.stdout).toMatch(/^default +waiting +LoadBalancer .* <pending> /m);
      // Label selectors, set-based too, on the two Services labelled here.
      kube.store.patch('services', 'default', 'listed', 'merge', {
        metadata: { labels: { app: 'listed' } },
      });
      kube.store.patch('services', 'default', 'waiting', 'merge', {
        metadata: { labels: { app: 'waiting' } },
      });
      const inSet = await kubectl('get', 'svc', '-l', 'app in (listed,other)');
      expect(inSet.stdout, inSet.stderr).toMatch(/^listed /m);
      expect(inSet.stdout).not.toMatch(/^waiting /m);
      const notInSet = await kubectl('get', 'svc', '-l', 'app notin (listed)');
      expect(notInSet.stdout, notInSet.stderr).toMatch(/^waiting /m);
      expect(notInSet.stdout).not.toMatch(/^listed /m);
      const wide = await kubectl('get', 'svc', 'listed', '-o', 'wide');
      expect(wide.stdout).toMatch(/ SELECTOR\n/);
      expect(wide.stdout).toMatch(/ app=listed\n/);
      const nodes = await kubectl('get', 'nodes', '-o', 'wide');
      expect(nodes.stdout).toMatch(/^NAME +STATUS +ROLES +AGE +VERSION +INTERNAL-IP /m);
      expect(nodes.stdout).toMatch(/^node-1 +Unknown +<none> +\d+s /m);
      for (const name of ['listed', 'waiting']) kube.store.delete('services', 'default', name);
    });

    it('a field selector picks the events: type=Warning lists only warnings, describe only its own', async () => {
      const web = loadBalancer('described');
      const other = loadBalancer('other');
      const uid = (object: { metadata: { uid?: unknown } }) => String(object.metadata.uid);
      event('described', uid(web), 'EnsuringLoadBalancer', 'Normal');
      event('described', uid(web), 'SyncLoadBalancerFailed', 'Warning');
      event('other', uid(other), 'EnsuredLoadBalancer', 'Normal');
      const warnings = await kubectl('get', 'events', '--field-selector', 'type=Warning');
      expect(warnings.stdout, warnings.stderr).toContain('SyncLoadBalancerFailed');
      expect(warnings.stdout).not.toContain('EnsuringLoadBalancer');
      expect(warnings.stdout).toMatch(/^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$/m);
      expect(warnings.stdout).toContain('service/described');
      const described = await kubectl('describe', 'service', 'described');
      expect(described.stdout, described.stderr).toContain('EnsuringLoadBalancer');
      expect(described.stdout).not.toContain('EnsuredLoadBalancer');
      const unknown = await kubectl('get', 'events', '--field-selector', 'colour=red');
      expect(unknown.stderr).toContain('field label not supported: colour');
    });

    it('wait --for=jsonpath answers when the named Service gets its address, not another', async () => {
      loadBalancer('awaited');
      loadBalancer('bystander', 'bystander.elb.example');
      const waiting = kubectl(
        'wait',
        'service/awaited',
        '--for=jsonpath={.status.loadBalancer.ingress[0].hostname}=awaited.elb.example',
        '--timeout=20s',
      );
      // Not met yet: the bystander's address must not satisfy it.
      const early = await Promise.race([
        waiting.then(() => 'answered'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 1_500)),
      ]);
      expect(early).toBe('waiting');
      const current = kube.store.get('services', 'default', 'awaited');
      kube.store.update(
        'services',
        'default',
        'awaited',
        {
          ...current,
          status: { loadBalancer: { ingress: [{ hostname: 'awaited.elb.example' }] } },
        },
        'status',
      );
      const result = await waiting;
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toContain('service/awaited condition met');
    });

    it('apply -f needs no --validate=false: the server validates fields, and names an unknown one', async () => {
      const manifest = (extra: Record<string, unknown> = {}) =>
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'applied', namespace: 'default' },
          spec: { type: 'LoadBalancer', ports: [{ port: 80, targetPort: 8080, ...extra }] },
        });
      const file = join(dir, 'applied.json');
      writeFileSync(file, manifest());
      const created = await kubectl('apply', '-f', file);
      expect(created.stdout, created.stderr).toContain('service/applied created');
      writeFileSync(file, manifest({ name: 'http' }));
      const configured = await kubectl('apply', '-f', file);
      expect(configured.stdout, configured.stderr).toContain('service/applied configured');
      writeFileSync(file, manifest({ colour: 'red' }));
      const refused = await kubectl('apply', '-f', file);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain(
        'strict decoding error: unknown field "spec.ports[0].colour"',
      );
      const stored = kube.store.get('services', 'default', 'applied');
      expect(JSON.stringify(stored.spec)).toContain('"name":"http"');
      expect(JSON.stringify(stored.spec)).not.toContain('colour');
      kube.store.delete('services', 'default', 'applied');
    });

    it('explain reads the OpenAPI document, and the server version gives kubectl no skew warning', async () => {
      const explained = await kubectl('explain', 'service.spec.ports');
      expect(explained.stdout, explained.stderr).toContain('FIELD: ports <[]ServicePort>');
      expect(explained.stdout).toMatch(/^ {2}nodePort\t<integer>$/m);
      const version = await kubectl('version');
      expect(version.stdout, version.stderr).toContain('Server Version: v1.33.0');
      expect(version.stderr).not.toContain('version difference');
    });

    it('create service loadbalancer and create namespace: kubectl sends protobuf, and the server reads it', async () => {
      const created = await kubectl('create', 'service', 'loadbalancer', 'made', '--tcp=443:8443');
      expect(created.stdout, created.stderr).toContain('service/made created');
      const made = kube.store.get('services', 'default', 'made');
      expect(made.metadata.labels).toEqual({ app: 'made' });
      expect(made.spec).toMatchObject({
        type: 'LoadBalancer',
        selector: { app: 'made' },
        ports: [{ name: '443-8443', port: 443, targetPort: 8443, protocol: 'TCP' }],
      });
      const named = await kubectl('create', 'service', 'clusterip', 'named', '--tcp=80:http');
      expect(named.stdout, named.stderr).toContain('service/named created');
      expect(kube.store.get('services', 'default', 'named').spec).toMatchObject({
        ports: [{ port: 80, targetPort: 'http' }],
      });
      const namespace = await kubectl('create', 'namespace', 'team-a');
      expect(namespace.stdout, namespace.stderr).toContain('namespace/team-a created');
      expect((await kubectl('get', 'ns', 'team-a')).stdout).toMatch(/^team-a +Active +\d+s$/m);
      const protobuf = kube.requests.filter(
        (r) => r.method === 'POST' && r.contentType === 'application/vnd.kubernetes.protobuf',
      );
      expect(protobuf.map((r) => r.status)).toEqual([201, 201, 201]);
      for (const name of ['made', 'named']) kube.store.delete('services', 'default', name);
    });

    it('apply --server-side: creates, keeps who owns what, refuses a conflict by name unless forced, and drops what it no longer applies', async () => {
      const manifest = (targetPort: number, labels?: Record<string, string>) =>
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'owned', namespace: 'default', ...(labels ? { labels } : {}) },
          spec: { type: 'LoadBalancer', ports: [{ port: 80, targetPort }] },
        });
      const file = join(dir, 'owned.json');
      writeFileSync(file, manifest(8080, { team: 'a' }));
      const created = await kubectl('apply', '--server-side', '-f', file);
      expect(created.stdout, created.stderr).toContain('service/owned serverside-applied');
      const managers = () =>
        (
          kube.store.get('services', 'default', 'owned').metadata.managedFields as {
            manager: string;
            operation: string;
          }[]
        ).map((entry) => `${entry.manager}/${entry.operation}`);
      expect(managers()).toEqual(['kubectl/Apply']);
      // Another manager changes a field kubectl applied.
      const patched = await kubectl(
        'patch',
        'service',
        'owned',
        '--field-manager=platform-bot',
        '--type=merge',
        '-p',
        '{"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":9000}]}}',
      );
      expect(patched.status, patched.stderr).toBe(0);
      expect(managers()).toEqual(['kubectl/Apply', 'platform-bot/Update']);
      writeFileSync(file, manifest(8081, { team: 'a' }));
      const refused = await kubectl('apply', '--server-side', '-f', file);
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain(
        'Apply failed with 1 conflict: conflict with "platform-bot": .spec.ports[port=80,protocol="TCP"].targetPort',
      );
      const targetPort = () => {
        const spec = kube.store.get('services', 'default', 'owned').spec as {
          ports: { targetPort: number }[];
        };
        return spec.ports[0]?.targetPort;
      };
      expect(targetPort()).toBe(9000);
      const forced = await kubectl('apply', '--server-side', '--force-conflicts', '-f', file);
      expect(forced.stdout, forced.stderr).toContain('serverside-applied');
      expect(targetPort()).toBe(8081);
      // The label is no longer applied, and nobody else holds it: it goes.
      writeFileSync(file, manifest(8081));
      const dropped = await kubectl('apply', '--server-side', '-f', file);
      expect(dropped.status, dropped.stderr).toBe(0);
      expect(kube.store.get('services', 'default', 'owned').metadata.labels).toBeUndefined();
      kube.store.delete('services', 'default', 'owned');
    });

    it('EndpointSlices of discovery.k8s.io/v1: get with their columns, explain, api-resources', async () => {
      kube.store.create('endpointslices', 'default', {
        metadata: { name: 'web-abc', labels: { 'kubernetes.io/service-name': 'web' } },
        addressType: 'IPv4',
        ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
        endpoints: ['10.0.1.5', '10.0.1.6', '10.0.1.7', '10.0.1.8'].map((ip) => ({
          addresses: [ip],
          conditions: { ready: true },
          targetRef: { kind: 'Pod', name: `pod-${ip}` },
        })),
      });
      const slices = await kubectl('get', 'endpointslices', '-l', 'kubernetes.io/service-name=web');
      expect(slices.stdout, slices.stderr).toMatch(/^NAME +ADDRESSTYPE +PORTS +ENDPOINTS +AGE$/m);
      expect(slices.stdout).toMatch(
        /^web-abc +IPv4 +8080 +10\.0\.1\.5,10\.0\.1\.6,10\.0\.1\.7 \+ 1 more\.\.\. +\d+s$/m,
      );
      const explained = await kubectl('explain', 'endpointslice.endpoints.conditions');
      expect(explained.stdout, explained.stderr).toContain('GROUP:      discovery.k8s.io');
      expect(explained.stdout).toMatch(/^ {2}terminating\t<boolean>$/m);
      const resources = await kubectl('api-resources');
      expect(resources.stdout, resources.stderr).toMatch(
        /^endpointslices +discovery\.k8s\.io\/v1 +true +EndpointSlice$/m,
      );
      kube.store.delete('endpointslices', 'default', 'web-abc');
    });

    it('--dry-run=server changes nothing: delete, patch, create and diff', async () => {
      loadBalancer('kept');
      const before = kube.store.get('services', 'default', 'kept');
      const revision = kube.store.currentRevision;
      const deleted = await kubectl('delete', 'service', 'kept', '--dry-run=server');
      expect(deleted.stdout, deleted.stderr).toContain('service "kept" deleted (server dry run)');
      const patched = await kubectl(
        'patch',
        'service',
        'kept',
        '--dry-run=server',
        '-p',
        '{"metadata":{"labels":{"tried":"yes"}}}',
        '-o',
        'jsonpath={.metadata.labels.tried}',
      );
      expect(patched.stdout, patched.stderr).toBe('yes');
      const file = join(dir, 'dry.json');
      writeFileSync(
        file,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'dry', namespace: 'default' },
          spec: { type: 'LoadBalancer', ports: [{ port: 80 }] },
        }),
      );
      const created = await kubectl('create', '--validate=false', '--dry-run=server', '-f', file);
      expect(created.stdout, created.stderr).toContain('service/dry created (server dry run)');
      const applied = await kubectl('apply', '--server-side', '--dry-run=server', '-f', file);
      expect(applied.stdout, applied.stderr).toContain(
        'service/dry serverside-applied (server dry run)',
      );
      const diff = await kubectl('diff', '-f', file);
      expect(diff.stdout, diff.stderr).toContain('+  name: dry');
      expect(kube.store.get('services', 'default', 'kept')).toEqual(before);
      expect(kube.store.list('services').map((s) => s.metadata.name)).not.toContain('dry');
      expect(kube.store.currentRevision).toBe(revision);
      const really = await kubectl('delete', 'service', 'kept');
      expect(really.stdout, really.stderr).toContain('service "kept" deleted');
      expect(kube.store.list('services').map((s) => s.metadata.name)).not.toContain('kept');
    });
  },
);
