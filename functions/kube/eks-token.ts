import { Sha256 } from '@aws-crypto/sha256-js';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';

/** EKS accepts a token for 15 minutes after it is signed; re-mint well before that. */
export const tokenLifetimeMs = 15 * 60 * 1000;
const remintAfterMs = 10 * 60 * 1000;

export interface EksToken {
  readonly token: string;
  /** When to stop using it and mint a new one. */
  readonly refreshAt: Date;
}

/**
 * A bearer token for the EKS API server, minted locally (no AWS call): `k8s-aws-v1.` + unpadded
 * base64url of a SigV4-presigned STS GetCallerIdentity URL that signs `x-k8s-aws-id: <cluster>`.
 * The EKS control plane calls STS with it to learn who we are. X-Amz-Expires stays 60, as
 * aws-iam-authenticator expects; the token itself is honoured for 15 minutes.
 */
export async function mintEksToken(options: {
  readonly clusterName: string;
  readonly region: string;
  readonly credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  readonly now: Date;
  /** Only for tests against a local endpoint; AWS is `sts.<region>.amazonaws.com`. */
  readonly stsHost?: string;
}): Promise<EksToken> {
  const hostname = options.stsHost ?? `sts.${options.region}.amazonaws.com`;
  const signer = new SignatureV4({
    service: 'sts',
    region: options.region,
    sha256: Sha256,
    credentials: options.credentials,
  });
  const request = new HttpRequest({
    method: 'GET',
    protocol: 'https:',
    hostname,
    path: '/',
    query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    headers: { host: hostname, 'x-k8s-aws-id': options.clusterName },
  });
  const signed = await signer.presign(request, { expiresIn: 60, signingDate: options.now });
  const query = Object.entries(signed.query ?? {})
    .flatMap(([key, value]) =>
      (Array.isArray(value) ? value : [value]).map(
        (v) => `${encodeURIComponent(key)}=${encodeURIComponent(String(v))}`,
      ),
    )
    .join('&');
  const url = `https://${hostname}/?${query}`;
  return {
    token: `k8s-aws-v1.${Buffer.from(url).toString('base64url')}`,
    refreshAt: new Date(options.now.getTime() + remintAfterMs),
  };
}
