export { adminUser, FakeKubeApiServer } from './server';
export type {
  Authorizer,
  Denial,
  FakeKubeApiServerOptions,
  RecordedRequest,
  RequestMatcher,
} from './server';
export {
  authenticatedGroup,
  mastersGroup,
  RbacAuthorizer,
  requestAttributes,
  serviceAccountUser,
} from './rbac';
export type { Decision, RequestAttributes, UserInfo } from './rbac';
export { KubeApiError } from './api-error';
export { ObjectStore } from './store';
export type { ResourceName, StoredObject } from './store';
