import {
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, inject, it } from 'vitest';
import { cli, eventually, outputShows, startCli } from '../support/cli-process';

/**
 * Issue 36's local-mode acceptance: on the embedded default, a Service annotated
 * `nlb-target-type: ip` with 3 simulated pods (`pod add`) gets an NLB whose target groups hold the
 * 3 pod IPs on the target port; `pod remove` deregisters one. The forwarder of `npm start` sees
 * the EndpointSlice change and sends the targets message, as in a cluster.
 */
const endpoint = inject('awsEndpoint');

describe('npm start with a Service whose targets are pods', () => {
  it('registers the simulated pods on the target port, and deregisters one removed', async () => {
    const clusterName = `pods-${Date.now().toString(36)}`;
    const env = {
      AWS_ENDPOINT_URL: endpoint,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_REGION: 'us-east-1',
      SSC_CLUSTER_NAME: clusterName,
      SSC_QUEUE_NAME: `${clusterName}-work`,
      SSC_TABLE_NAME: `${clusterName}-state`,
    };
    const run = startCli([], env);
    const shows = (pattern: RegExp, what: string) => outputShows(run, pattern, what, 90_000);
    try {
      await shows(/default\/hello +ready +3 /, 'the sample Service ready');
      const kubeconfig = /kubectl --kubeconfig (\S+)/.exec(run.output())?.[1] ?? '';
      const config = new KubeConfig();
      config.loadFromFile(kubeconfig);
      await config.makeApiClient(CoreV1Api).createNamespacedService({
        namespace: 'default',
        body: {
          metadata: {
            name: 'shop',
            annotations: { 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip' },
          },
          spec: {
            type: 'LoadBalancer',
            loadBalancerClass: 'serverless-service-controller.io/nlb',
            selector: { app: 'shop' },
            ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
          },
        },
      });
      const added = await cli(['pod', 'add', 'default/shop', '3'], env);
      expect(added.code, added.output).toBe(0);
      const ips = [...added.output.matchAll(/\((10\.0\.200\.\d+)\)/g)].map((m) => m[1] ?? '');
      expect(ips).toHaveLength(3);
      await shows(/default\/shop +ready +3 /, 'default/shop ready with 3 pod targets');

      const elbv2 = new ElasticLoadBalancingV2Client({
        endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      const podTargets = async () => {
        const groups = (await elbv2.send(new DescribeTargetGroupsCommand({}))).TargetGroups ?? [];
        const ours = groups.filter(
          (g) => g.TargetType === 'ip' && g.TargetGroupName?.startsWith('k8s-default-shop'),
        );
        const targets: string[] = [];
        for (const group of ours) {
          const health = await elbv2.send(
            new DescribeTargetHealthCommand({ TargetGroupArn: group.TargetGroupArn }),
          );
          for (const d of health.TargetHealthDescriptions ?? [])
            targets.push(`${d.Target?.Id ?? ''}:${d.Target?.Port ?? ''}`);
        }
        return { groups: ours.length, targets: targets.sort() };
      };
      expect(await podTargets()).toEqual({
        groups: 1,
        targets: ips.map((ip) => `${ip}:8080`).sort(),
      });

      const [gone, ...left] = ips;
      const since = Date.now();
      const removed = await cli(['pod', 'remove', 'default/shop', gone ?? ''], env);
      expect(removed.code, removed.output).toBe(0);
      await eventually(
        podTargets,
        (found) =>
          found.targets.join() ===
          left
            .map((ip) => `${ip}:8080`)
            .sort()
            .join(),
        `${gone ?? ''} deregistered`,
        60_000,
      );
      // Reported, not asserted against a wall-clock bound: the acceptance asks for 5 s.
      console.info(`pod removed → deregistered in ${((Date.now() - since) / 1000).toFixed(1)} s`);
    } finally {
      run.child.kill('SIGINT');
    }
    expect(await run.closed, run.output().slice(-4_000)).toBe(0);
  }, 240_000);
});
