import { describe, expect, it } from 'vitest';
import { kubeconfigAccess } from '../../../functions/kube/kubeconfig';

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('kubeconfigAccess', () => {
  it("takes the current context's cluster and user, with inline CA and client certificate", async () => {
    const access = kubeconfigAccess(
      [
        'apiVersion: v1',
        'clusters:',
        '- {name: other, cluster: {server: "https://other:6443"}}',
        `- {name: prod, cluster: {server: "https://prod:6443", certificate-authority-data: ${b64('CA-PEM')}}}`,
        'users:',
        `- {name: admin, user: {client-certificate-data: ${b64('CERT')}, client-key-data: ${b64('KEY')}}}`,
        '- {name: ci, user: {token: ci-token}}',
        'contexts:',
        '- {name: first, context: {cluster: other, user: ci}}',
        '- {name: prod, context: {cluster: prod, user: admin}}',
        'current-context: prod',
      ].join('\n'),
    );
    expect(access).toMatchObject({
      server: 'https://prod:6443',
      ca: 'CA-PEM',
      cert: 'CERT',
      key: 'KEY',
      insecureSkipTlsVerify: false,
    });
    expect(await access.token?.()).toBeUndefined();
  });

  it('refuses an exec plugin by name, quoting none of the kubeconfig', () => {
    const text = [
      'clusters: [{name: c, cluster: {server: "https://c"}}]',
      'users: [{name: u, user: {exec: {command: aws, args: [eks, get-token, SECRET-ARG]}}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');
    expect(() => kubeconfigAccess(text)).toThrow(/exec plugin/);
    expect(() => kubeconfigAccess(text)).not.toThrow(/SECRET-ARG/);
  });

  it('refuses several contexts without current-context, rather than pick a cluster', () => {
    const text = [
      'clusters: [{name: a, cluster: {server: "https://a"}}, {name: b, cluster: {server: "https://b"}}]',
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: a, user: u}}, {name: y, context: {cluster: b, user: u}}]',
    ].join('\n');
    expect(() => kubeconfigAccess(text)).toThrow('2 contexts and no current-context');
    // One context is unambiguous.
    const one = text.replace(', {name: y, context: {cluster: b, user: u}}', '');
    expect(kubeconfigAccess(one).server).toBe('https://a');
  });

  it('refuses a context whose user is not defined, rather than send anonymous requests', () => {
    const text = [
      'clusters: [{name: c, cluster: {server: "https://c"}}]',
      'users: []',
      'contexts: [{name: x, context: {cluster: c, user: gone}}]',
      'current-context: x',
    ].join('\n');
    expect(() => kubeconfigAccess(text)).toThrow("the current context's user gone is not defined");
  });

  it('names a missing current context without values', () => {
    expect(() => kubeconfigAccess('clusters: []\ncurrent-context: gone')).toThrow(
      'not a kubeconfig: the current context is not defined',
    );
  });
});
