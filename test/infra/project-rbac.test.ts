import { describe, expect, it } from 'vitest';
import {
  controllerGroup as stackControllerGroup,
  forwarderNamespace,
  forwarderServiceAccount,
} from '../../infra/controller-stack';
import { requestAttributes } from '../../functions/local/fake-kube';
import { controllerGroup, loadProjectRbac } from '../../functions/local/project-rbac';

const project = loadProjectRbac();
const allowed = (who: 'functions' | 'forwarder', method: string, path: string) => {
  const url = new URL(path, 'http://localhost');
  return project.authorizer.authorize(
    project[who],
    requestAttributes(method, url.pathname, url.searchParams),
  ).allowed;
};

describe('the project RBAC the fake API server enforces (infra/k8s)', () => {
  it('authenticates the functions as the stack’s access entry maps them, and the forwarder as the ServiceAccount Pod Identity is associated with', () => {
    expect(controllerGroup).toBe(stackControllerGroup);
    expect(project.functions.groups).toContain(stackControllerGroup);
    expect(project.forwarder.name).toBe(
      `system:serviceaccount:${forwarderNamespace}:${forwarderServiceAccount}`,
    );
  });

  it('binds each component to its own role and nothing more', () => {
    expect(allowed('forwarder', 'GET', '/api/v1/services?watch=true')).toBe(true);
    expect(allowed('forwarder', 'PATCH', '/api/v1/namespaces/default/services/web')).toBe(false);
    // The pod targets of ip-mode Services: the forwarder watches every slice, the functions only
    // list a Service's.
    const slices = '/apis/discovery.k8s.io/v1/endpointslices';
    expect(
      allowed('forwarder', 'GET', `${slices}?labelSelector=kubernetes.io%2Fservice-name`),
    ).toBe(true);
    expect(allowed('forwarder', 'GET', `${slices}?watch=true`)).toBe(true);
    expect(
      allowed('forwarder', 'GET', '/apis/discovery.k8s.io/v1/namespaces/a/endpointslices/s'),
    ).toBe(false);
    expect(
      allowed('forwarder', 'DELETE', '/apis/discovery.k8s.io/v1/namespaces/a/endpointslices/s'),
    ).toBe(false);
    expect(allowed('functions', 'GET', `${slices}?watch=true`)).toBe(false);
    expect(allowed('functions', 'PATCH', '/api/v1/namespaces/default/services/web/status')).toBe(
      true,
    );
    expect(allowed('functions', 'GET', '/api/v1/services?watch=true')).toBe(false);
    expect(allowed('functions', 'DELETE', '/api/v1/nodes/n1')).toBe(false);
  });
});
