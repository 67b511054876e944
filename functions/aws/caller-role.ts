/**
 * Which part of the controller an SDK client works for. Every client the controller builds sends
 * it as its user agent's app ID (`app/serverless-service-controller-functions` in the User-Agent
 * header), so CloudTrail's `userAgent` field tells the functions' calls from the forwarder's and
 * from an operator's `npm start` or `uninstall`, and so do the tests' IAM recordings, which
 * evaluate each call against the policy of the role that made it.
 */
export type CallerRole = 'functions' | 'forwarder' | 'operator';

const appIdPrefix = 'serverless-service-controller-';

/** The client option that marks a client as working for `role`. */
export function callerRoleOption(role: CallerRole): { readonly userAgentAppId: string } {
  return { userAgentAppId: `${appIdPrefix}${role}` };
}

/** The role a client's app ID names; undefined for a client the controller did not build. */
export function callerRoleOfAppId(appId: unknown): CallerRole | undefined {
  if (typeof appId !== 'string' || !appId.startsWith(appIdPrefix)) return undefined;
  const role = appId.slice(appIdPrefix.length);
  return role === 'functions' || role === 'forwarder' || role === 'operator' ? role : undefined;
}
