import { describe, expect, it } from 'vitest';
import { errorKind, errorMessage, failureClassOf } from '../../../functions/core/errors';
import { kubeConfigFromSecret } from '../../../functions/kube/kubeconfig-secret';

const arn = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeconfig-AbCdEf';

/** A kubeconfig whose YAML breaks right after the credentials: the parser quotes those lines. */
const broken = [
  'apiVersion: v1',
  'kind: Config',
  'users:',
  '- name: controller',
  '  user:',
  '    token: TOKEN-0123456789',
  '    client-key-data: KEYDATA-ABCDEF',
  '\tbroken: indentation',
].join('\n');

describe('kubeConfigFromSecret', () => {
  it('a malformed kubeconfig fails with the YAML reason and position, never the lines it quotes', () => {
    let caught: unknown;
    try {
      kubeConfigFromSecret(broken, arn);
    } catch (error) {
      caught = error;
    }
    const message = errorMessage(caught);
    expect(message).toContain(arn);
    expect(message).toMatch(/invalid YAML: .*line 8/);
    expect(message).not.toContain('TOKEN-0123456789');
    expect(message).not.toContain('KEYDATA-ABCDEF');
    // Someone must fix the secret: retried, classed as a dependency for the alarm.
    expect(errorKind(caught)).toBe('retryable');
    expect(failureClassOf(caught)).toBe('dependency');
  });

  it('reads a valid kubeconfig', () => {
    const text = [
      'apiVersion: v1',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]',
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');
    expect(kubeConfigFromSecret(text, arn).getCurrentCluster()?.server).toBe(
      'https://127.0.0.1:6443',
    );
  });
});
