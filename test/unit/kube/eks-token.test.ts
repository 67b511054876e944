import { describe, expect, it } from 'vitest';
import { mintEksToken } from '../../../functions/kube/eks-token';

/** moto serves no presigned STS URLs and EKS cannot be reached offline, so the token is checked here. */
describe('EKS token', () => {
  const now = new Date('2026-11-30T12:00:00Z');
  const credentials = {
    accessKeyId: 'AKIDEXAMPLE',
    secretAccessKey: 'secret',
    sessionToken: 'session-token',
  };

  async function decoded() {
    const { token, refreshAt } = await mintEksToken({
      clusterName: 'prod-cluster',
      region: 'eu-west-1',
      credentials,
      now,
    });
    expect(token.startsWith('k8s-aws-v1.')).toBe(true);
    const encoded = token.slice('k8s-aws-v1.'.length);
    expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/); // base64url without padding
    return { url: new URL(Buffer.from(encoded, 'base64url').toString('utf8')), refreshAt };
  }

  it('is a presigned STS GetCallerIdentity URL for the Region', async () => {
    const { url } = await decoded();
    expect(url.protocol).toBe('https:');
    expect(url.host).toBe('sts.eu-west-1.amazonaws.com');
    expect(url.pathname).toBe('/');
    expect(url.searchParams.get('Action')).toBe('GetCallerIdentity');
    expect(url.searchParams.get('Version')).toBe('2011-06-15');
  });

  it('signs x-k8s-aws-id, so the token is bound to the cluster', async () => {
    const { url } = await decoded();
    expect(url.searchParams.get('X-Amz-SignedHeaders')?.split(';').sort()).toEqual([
      'host',
      'x-k8s-aws-id',
    ]);
    expect(url.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.searchParams.get('X-Amz-Credential')).toBe(
      'AKIDEXAMPLE/20261130/eu-west-1/sts/aws4_request',
    );
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe('session-token');
  });

  it('expires as aws-iam-authenticator expects and is re-minted well within 15 minutes', async () => {
    const { url, refreshAt } = await decoded();
    expect(url.searchParams.get('X-Amz-Expires')).toBe('60');
    expect(url.searchParams.get('X-Amz-Date')).toBe('20261130T120000Z');
    expect(refreshAt.getTime() - now.getTime()).toBe(10 * 60 * 1000);
  });

  it('changes its signature with the cluster name', async () => {
    const a = await mintEksToken({ clusterName: 'a', region: 'eu-west-1', credentials, now });
    const b = await mintEksToken({ clusterName: 'b', region: 'eu-west-1', credentials, now });
    expect(a.token).not.toBe(b.token);
  });
});
