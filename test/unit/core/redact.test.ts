import { describe, expect, it } from 'vitest';
import { errorMessage } from '../../../functions/core/errors';
import { redactSecrets } from '../../../functions/core/redact';

describe('redactSecrets', () => {
  it.each([
    ['token: abc.def-123', 'token: [redacted]'],
    ['    client-key-data: LS0tLS1CRUdJTg==', '    client-key-data: [redacted]'],
    ['client-certificate-data: "LS0t"', 'client-certificate-data: "[redacted]"'],
    ['{"token":"s3cr3t","x":1}', '{"token":"[redacted]","x":1}'],
    ['password=hunter2 next', 'password=[redacted] next'],
    ['Authorization: Bearer abcdefgh12345678', 'Authorization: Bearer [redacted]'],
    ['k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbQ', '[redacted token]'],
    ['jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.sig-part', 'jwt [redacted token]'],
  ])('masks %s', (text, expected) => {
    expect(redactSecrets(text)).toBe(expected);
  });

  it('masks a private key block, also one cut short by truncation', () => {
    const key = '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----';
    expect(redactSecrets(`key ${key} after`)).toBe('key [redacted key] after');
    expect(redactSecrets('-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg')).toBe('[redacted key]');
  });

  it('leaves ordinary controller messages alone', () => {
    const text =
      'annotation service.beta.kubernetes.io/aws-load-balancer-scheme: "sideways" is not internal or internet-facing; secret arn:aws:secretsmanager:us-east-1:123456789012:secret:kc';
    expect(redactSecrets(text)).toBe(text);
  });

  it('is applied to every error message the controller publishes', () => {
    expect(errorMessage(new Error('bad kubeconfig near token: abc123'))).toBe(
      'bad kubeconfig near token: [redacted]',
    );
    expect(errorMessage('password: x')).toBe('password: [redacted]');
  });
});
