export { FakeKubeApiServer } from './server';
export type { FakeKubeApiServerOptions, RecordedRequest, RequestMatcher } from './server';
export { KubeApiError, ObjectStore } from './store';
export type { ResourceName, StoredObject } from './store';
