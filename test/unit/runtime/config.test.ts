import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  configFromEnvironment,
  controllerConfigSchema,
  parseConfig,
  type ControllerConfig,
} from '../../../functions/contract/controller-config';

/** The required settings only. */
function minimal(): Record<string, unknown> {
  return {
    clusterName: 'prod-eu',
    region: 'eu-west-1',
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
    tableName: 'controller-state',
    aws: { vpcId: 'vpc-0a1b2c3d' },
    kubernetes: { mode: 'kubeconfig' },
  };
}

function configurationError(run: () => unknown): ConfigurationError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

/** The setting paths an error names, in order: `  - <path>: <message>` per line. */
function namedSettings(error: ConfigurationError): string[] {
  const [heading, ...lines] = error.message.split('\n');
  expect(heading).toBe('invalid controller configuration:');
  return lines.map((line) => /^ {2}- ([^:]+): /.exec(line)?.[1] ?? `unparsed: ${line}`);
}

describe('parseConfig', () => {
  it('applies every default to a configuration with only the required settings', () => {
    const expected: ControllerConfig = {
      clusterName: 'prod-eu',
      region: 'eu-west-1',
      loadBalancerClass: 'serverless-service-controller.io/nlb',
      claimClassless: false,
      nodePolicy: 'stable',
      queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
      tableName: 'controller-state',
      nodeSyncPeriodSeconds: 100,
      nodeSyncMinIntervalSeconds: 10,
      directHostUpdates: 5,
      sweepPeriodSeconds: 1800,
      backoffBaseSeconds: 5,
      backoffMaxSeconds: 300,
      leaseSeconds: 120,
      elbv2CallsPerSecond: 20,
      orphanGraceSeconds: 900,
      aws: {
        vpcId: 'vpc-0a1b2c3d',
        defaultScheme: 'internal',
        defaultSslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
        defaultTags: {},
        endpoints: {},
      },
      kubernetes: { mode: 'kubeconfig' },
    };
    expect(parseConfig(minimal())).toEqual(expected);
  });

  it('keeps explicit settings over the defaults', () => {
    const config = parseConfig({
      ...minimal(),
      loadBalancerClass: 'example.com/nlb',
      claimClassless: true,
      nodePolicy: 'seed',
      leaseSeconds: 60,
      orphanGraceSeconds: 0,
      aws: {
        vpcId: 'vpc-0a1b2c3d',
        backendSecurityGroupId: 'sg-0123abcd',
        defaultScheme: 'internet-facing',
        defaultTags: { team: 'platform' },
        endpoints: { dynamodb: 'http://127.0.0.1:5000' },
      },
    });
    expect(config).toMatchObject({
      loadBalancerClass: 'example.com/nlb',
      claimClassless: true,
      nodePolicy: 'seed',
      leaseSeconds: 60,
      orphanGraceSeconds: 0,
      aws: {
        backendSecurityGroupId: 'sg-0123abcd',
        defaultScheme: 'internet-facing',
        defaultTags: { team: 'platform' },
        endpoints: { dynamodb: 'http://127.0.0.1:5000' },
      },
    });
  });

  it.each([
    [
      {
        mode: 'eks',
        clusterName: 'prod',
        endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com',
        certificateAuthorityData: 'LS0tLS1CRUdJTg==',
      },
    ],
    [
      {
        mode: 'secret',
        secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:kubeconfig-AbCdEf',
      },
    ],
    [{ mode: 'kubeconfig', path: '/etc/kube/config' }],
  ])('accepts the Kubernetes connection %j', (kubernetes) => {
    expect(parseConfig({ ...minimal(), kubernetes }).kubernetes).toEqual(kubernetes);
  });

  it('names every bad or missing setting in one error: missing clusterName, bad region, bad mode', () => {
    const input = minimal();
    delete input.clusterName;
    const error = configurationError(() =>
      parseConfig({ ...input, region: 'Europe', kubernetes: { mode: 'magic' } }),
    );
    expect(error.name).toBe('ConfigurationError');
    expect(namedSettings(error)).toEqual(['clusterName', 'region', 'kubernetes.mode']);
    expect(error.message).toContain('  - region: an AWS Region such as us-east-1');
  });

  it('names nested settings and unknown keys together', () => {
    const error = configurationError(() =>
      parseConfig({
        ...minimal(),
        leaseSecond: 30,
        nodeSyncPeriodSeconds: 59,
        backoffBaseSeconds: 1.5,
        aws: { vpcId: 'vpc-XYZ', endpoints: { sqs: 'not a url', s3: 'http://127.0.0.1:1' } },
        kubernetes: { mode: 'eks', clusterName: 'prod', endpoint: 'not a url' },
      }),
    );
    expect(namedSettings(error).sort()).toEqual([
      '(root)',
      'aws.endpoints',
      'aws.endpoints.sqs',
      'aws.vpcId',
      'backoffBaseSeconds',
      'kubernetes.endpoint',
      'nodeSyncPeriodSeconds',
    ]);
    expect(error.message).toContain('"leaseSecond"');
    expect(error.message).toContain('"s3"');
  });

  it('refuses a plain-HTTP EKS endpoint: the minted token would travel in cleartext', () => {
    const error = configurationError(() =>
      parseConfig({
        ...minimal(),
        kubernetes: {
          mode: 'eks',
          clusterName: 'prod',
          endpoint: 'http://ABC.gr7.eu-west-1.eks.amazonaws.com',
          certificateAuthorityData: 'LS0tLS1CRUdJTg==',
        },
      }),
    );
    expect(error.message).toContain('  - kubernetes.endpoint: an https URL');
  });

  it('accepts allowInsecureConnection in secret and kubeconfig modes only', () => {
    const secret = {
      mode: 'secret',
      secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:kubeconfig-AbCdEf',
      allowInsecureConnection: true,
    };
    expect(parseConfig({ ...minimal(), kubernetes: secret }).kubernetes).toEqual(secret);
    const error = configurationError(() =>
      parseConfig({
        ...minimal(),
        kubernetes: { mode: 'eks', clusterName: 'prod', allowInsecureConnection: true },
      }),
    );
    expect(error.message).toContain('"allowInsecureConnection"');
  });

  it('accepts EKS mode without endpoint and CA (the functions read them with eks:DescribeCluster)', () => {
    const config = parseConfig({ ...minimal(), kubernetes: { mode: 'eks', clusterName: 'prod' } });
    expect(config.kubernetes).toEqual({ mode: 'eks', clusterName: 'prod' });
  });

  it('reports a missing kubernetes section and a missing aws section', () => {
    const input = minimal();
    delete input.kubernetes;
    delete input.aws;
    expect(namedSettings(configurationError(() => parseConfig(input)))).toEqual([
      'aws',
      'kubernetes',
    ]);
  });

  it.each([
    ['nodeSyncPeriodSeconds', 59, 60],
    ['nodeSyncPeriodSeconds', 901, 900],
    ['sweepPeriodSeconds', 299, 300],
    ['backoffMaxSeconds', 901, 900],
    ['leaseSeconds', 9, 10],
    ['leaseSeconds', 901, 900],
    ['elbv2CallsPerSecond', 0, 1],
    ['elbv2CallsPerSecond', 1001, 1000],
    ['orphanGraceSeconds', -1, 0],
  ])('rejects %s = %i and accepts %i', (setting, rejected, accepted) => {
    const error = configurationError(() => parseConfig({ ...minimal(), [setting]: rejected }));
    expect(namedSettings(error)).toEqual([setting]);
    expect(parseConfig({ ...minimal(), [setting]: accepted })).toMatchObject({
      [setting]: accepted,
    });
  });

  it.each([
    ['clusterName', '-starts-with-dash'],
    ['clusterName', 'x'.repeat(101)],
    ['region', 'us-east'],
    ['loadBalancerClass', 'nlb'],
    ['tableName', 'ab'],
    ['queueUrl', 'work-queue'],
  ])('rejects %s = %j', (setting, value) => {
    expect(
      namedSettings(configurationError(() => parseConfig({ ...minimal(), [setting]: value }))),
    ).toEqual([setting]);
  });

  it('rejects a secret ARN of another service', () => {
    const error = configurationError(() =>
      parseConfig({
        ...minimal(),
        kubernetes: { mode: 'secret', secretArn: 'arn:aws:s3:::kubeconfig-bucket' },
      }),
    );
    expect(namedSettings(error)).toEqual(['kubernetes.secretArn']);
  });

  it('rejects a configuration that is not an object, naming the root', () => {
    for (const input of [null, 'config', 42, []]) {
      expect(namedSettings(configurationError(() => parseConfig(input)))).toEqual(['(root)']);
    }
  });
});

describe('configFromEnvironment', () => {
  it('parses CONTROLLER_CONFIG as JSON and validates it', () => {
    const env = { CONTROLLER_CONFIG: JSON.stringify(minimal()), OTHER: 'ignored' };
    expect(configFromEnvironment(env)).toEqual(parseConfig(minimal()));
  });

  it.each([
    ['unset', {}],
    ['empty', { CONTROLLER_CONFIG: '' }],
    ['blank', { CONTROLLER_CONFIG: ' \n\t ' }],
  ])('reports CONTROLLER_CONFIG as not set when it is %s', (_label, env) => {
    const error = configurationError(() => configFromEnvironment(env));
    expect(error.message).toBe(
      'invalid controller configuration:\n  - CONTROLLER_CONFIG: not set (a JSON object)',
    );
  });

  it('reports CONTROLLER_CONFIG that is not JSON, with the parser’s reason', () => {
    const error = configurationError(() =>
      configFromEnvironment({ CONTROLLER_CONFIG: "{clusterName: 'prod'}" }),
    );
    expect(error.message).toMatch(
      /^invalid controller configuration:\n {2}- CONTROLLER_CONFIG: not JSON \(.+\)$/,
    );
  });

  it('reports the settings of JSON that does not validate', () => {
    const error = configurationError(() =>
      configFromEnvironment({ CONTROLLER_CONFIG: JSON.stringify({ ...minimal(), region: 1 }) }),
    );
    expect(namedSettings(error)).toEqual(['region']);
  });
});

describe('docs/runtime.md configuration table', () => {
  it('documents every setting the schema accepts, the endpoint overrides included', () => {
    const doc = readFileSync('docs/runtime.md', 'utf8');
    const table = doc.slice(doc.indexOf('## Configuration'), doc.indexOf('## Observability'));
    const documented = new Set([...table.matchAll(/`([a-zA-Z0-9.]+)`/g)].map((m) => m[1]));
    const top = Object.keys(controllerConfigSchema.shape).filter((k) => k !== 'aws');
    const aws = Object.keys(controllerConfigSchema.shape.aws.shape).map((k) => `aws.${k}`);
    // The endpoints object sits inside a default; its keys are the inner object's shape.
    const endpoints = Object.keys(
      controllerConfigSchema.shape.aws.shape.endpoints._zod.def.innerType.shape,
    );
    expect([...top, ...aws, ...endpoints].filter((k) => !documented.has(k))).toEqual([]);
  });
});
