import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteTableCommand, DynamoDBClient, UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import {
  ElasticLoadBalancingV2Client,
  paginateDescribeLoadBalancers,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { stackNameFor } from './settings';

/**
 * `npm run smoke:aws`: the opt-in end-to-end check in a real account and cluster. Deploys the
 * stack, installs the forwarder, creates a LoadBalancer Service, waits for its NLB, deletes the
 * Service, checks the NLB is gone, then uninstalls and destroys. Needs AWS credentials, kubectl
 * pointed at an EKS cluster (KUBECONFIG) and SMOKE_CLUSTER_NAME, SMOKE_VPC_ID; skipped otherwise.
 */
const needed = ['SMOKE_CLUSTER_NAME', 'SMOKE_VPC_ID'] as const;

async function hasCredentials(): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      defaultProvider()(),
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), 10_000);
      }),
    ]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

function run(command: string, args: string[]): string {
  console.log(`$ ${command} ${args.join(' ')}`);
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

async function waitFor<T>(what: string, seconds: number, probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds} s waiting for ${what}`);
    await sleep(10_000);
  }
}

async function main(): Promise<void> {
  const missing = needed.filter((name) => !process.env[name]);
  if (missing.length > 0) {
    console.log(`smoke:aws skipped: set ${missing.join(' and ')} (and KUBECONFIG for kubectl).`);
    return;
  }
  if (!(await hasCredentials())) {
    console.log(
      'smoke:aws skipped: no AWS credentials configured (see the AWS SDK credential chain).',
    );
    return;
  }
  const cluster = process.env.SMOKE_CLUSTER_NAME ?? '';
  const context = ['-c', `clusterName=${cluster}`, '-c', `vpcId=${process.env.SMOKE_VPC_ID ?? ''}`];
  const stackName = stackNameFor(cluster);
  const service = 'smoke-nlb';
  let deployed = false;
  try {
    run('npx', [
      'cdk',
      'deploy',
      stackName,
      ...context,
      '--require-approval',
      'never',
      '--outputs-file',
      'cdk-outputs.json',
    ]);
    deployed = true;
    run('npx', ['tsx', 'scripts/configure-k8s.ts', 'cdk-outputs.json']);
    run('kubectl', ['apply', '--server-side', '-k', 'infra/k8s']);
    writeFileSync(
      'smoke-service.json',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: service, namespace: 'default' },
        spec: {
          type: 'LoadBalancer',
          loadBalancerClass: 'serverless-service-controller.io/nlb',
          selector: { app: service },
          ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }],
        },
      }),
    );
    run('kubectl', ['apply', '-f', 'smoke-service.json']);
    const hostname = await waitFor('the NLB hostname in the Service status', 600, () => {
      const value = run('kubectl', [
        'get',
        'service',
        service,
        '-o',
        'jsonpath={.status.loadBalancer.ingress[0].hostname}',
      ]).trim();
      return value === '' ? undefined : value;
    });
    console.log(`NLB ready: ${hostname}`);
    const elbv2 = new ElasticLoadBalancingV2Client({});
    const dnsNames = async () => {
      const names: (string | undefined)[] = [];
      for await (const page of paginateDescribeLoadBalancers({ client: elbv2 }, {})) {
        names.push(...(page.LoadBalancers ?? []).map((lb) => lb.DNSName));
      }
      return names;
    };
    if (!(await dnsNames()).includes(hostname)) throw new Error(`no NLB with DNS name ${hostname}`);
    run('kubectl', ['delete', 'service', service, '--wait=true', '--timeout=600s']);
    if ((await dnsNames()).includes(hostname))
      throw new Error(`NLB ${hostname} still exists after delete`);
    console.log('smoke:aws passed: NLB created for the Service and deleted with it.');
  } finally {
    if (deployed) {
      // The Service first, while the controller still runs: it deletes the NLB and releases the
      // finalizer. Then the forwarder, the stack, and the table the stack keeps on destroy.
      try {
        run('kubectl', [
          'delete',
          'service',
          service,
          '--ignore-not-found',
          '--wait=true',
          '--timeout=600s',
        ]);
      } catch (error) {
        console.error(`could not delete the smoke Service: ${String(error)}`);
      }
      run('kubectl', ['delete', '-k', 'infra/k8s', '--ignore-not-found']);
      const outputs = JSON.parse(readFileSync('cdk-outputs.json', 'utf8')) as Record<
        string,
        Record<string, string>
      >;
      run('npx', ['cdk', 'destroy', stackName, ...context, '--force']);
      const table = outputs[stackName]?.StateTableName;
      if (table) {
        const dynamodb = new DynamoDBClient({});
        // DeleteTable is refused while the deletion protection the stack set is on.
        await dynamodb.send(
          new UpdateTableCommand({ TableName: table, DeletionProtectionEnabled: false }),
        );
        await dynamodb.send(new DeleteTableCommand({ TableName: table }));
      }
    }
  }
}

await main();
