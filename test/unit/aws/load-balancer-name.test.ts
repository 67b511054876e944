import { describe, expect, it } from 'vitest';
import { parseAnnotations } from '../../../functions/nlb/model/annotations';
import { buildDesiredLoadBalancer } from '../../../functions/nlb/model/desired';
import {
  loadBalancerName,
  ownershipTags,
  withNamingVersion,
} from '../../../functions/nlb/model/naming';
import { holderOf } from '../../../functions/nlb/ownership';
import { TerminalError } from '../../../functions/core/errors';
import { makeService } from '../../../kit/core-objects';
import { testProviderSettings } from '../../support/nlb-settings';

const nameAnnotation = 'service.beta.kubernetes.io/aws-load-balancer-name';
const named = (name: string) => makeService({ annotations: { [nameAnnotation]: name } });

function desiredFor(name?: string) {
  const service = name === undefined ? makeService() : named(name);
  return {
    service,
    desired: buildDesiredLoadBalancer({
      service,
      hosts: [],
      settings: testProviderSettings,
      options: parseAnnotations(service),
      subnets: [{ subnetId: 'subnet-a', availabilityZone: 'us-east-1a' }],
    }),
  };
}

describe('annotation aws-load-balancer-name', () => {
  it.each([
    ['a'],
    ['my-nlb'],
    ['Prod-Web-01'],
    ['x'.repeat(32)],
    // Only the prefix `internal-` is refused, as in AWS's rule.
    ['my-internal-nlb'],
  ])('accepts %s', (name) => {
    expect(parseAnnotations(named(name)).loadBalancerName).toBe(name);
  });

  it.each([
    ['x'.repeat(33), 'more than 32 characters'],
    ['-web', 'a leading hyphen'],
    ['web-', 'a trailing hyphen'],
    ['internal-web', 'the prefix internal-'],
    ['my_nlb', 'an underscore'],
    ['my.nlb', 'a dot'],
    ['', 'an empty value'],
  ])('refuses %j (%s) with a terminal error naming the annotation', (name) => {
    const parse = () => parseAnnotations(named(name));
    expect(parse).toThrow(TerminalError);
    expect(parse).toThrow(new RegExp(`${nameAnnotation}: invalid value`));
    expect(parse).toThrow(/at most|1 to 32/);
  });

  it('names the desired NLB and marks the name as the annotation’s', () => {
    const { desired } = desiredFor('shop-frontend');
    expect(desired.name).toBe('shop-frontend');
    expect(desired.nameFromAnnotation).toBe(true);
  });

  it('leaves the derived name, unmarked, without the annotation', () => {
    const { service, desired } = desiredFor();
    expect(desired.name).toBe(loadBalancerName('c1', service, 'internal'));
    expect(desired.nameFromAnnotation).toBeUndefined();
  });

  it('keeps the annotation’s name for a Service on the older naming version, renaming only derived names', () => {
    const { service, desired } = desiredFor('shop-frontend');
    const old = withNamingVersion(desired, 'c1', service, 1);
    expect(old.name).toBe('shop-frontend');
    expect(old.securityGroup.name).not.toBe(desired.securityGroup.name);
  });
});

describe('holderOf', () => {
  it('names the Service and cluster of this controller', () => {
    expect(
      holderOf({
        [ownershipTags.cluster]: 'other',
        [ownershipTags.service]: 'shop/web',
        [ownershipTags.serviceUid]: 'u-9',
      }),
    ).toBe("this controller's Service shop/web (UID u-9) in cluster other");
  });

  it('recognises the other controllers by their tags', () => {
    expect(holderOf({ 'service.k8s.aws/stack': 'shop/web' })).toBe(
      "aws-load-balancer-controller's Service shop/web",
    );
    expect(holderOf({ 'kubernetes.io/service-name': 'shop/web' })).toBe(
      "cloud-provider-aws's Service shop/web",
    );
  });

  it('says when no controller tagged it', () => {
    expect(holderOf({ owner: 'someone' })).toMatch(/without ownership tags/);
  });
});
