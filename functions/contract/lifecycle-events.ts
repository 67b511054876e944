import * as z from 'zod/mini';
import './zod-messages';

/** The EventBridge `source` of every lifecycle event. */
export const eventSource = 'serverless-service-controller';
/** Bumped on a change that could break a consumer; additions keep it. */
export const eventSchemaVersion = 1;

/**
 * What every event carries: which controller, which Service, the id that is also in the logs, and
 * what a consumer needs when an event comes late or twice (a retried publish): a unique id to
 * drop duplicates by and the time it happened to order by.
 */
const common = {
  schemaVersion: z.literal(eventSchemaVersion),
  eventId: z.string().check(z.minLength(1)),
  occurredAt: z.iso.datetime(),
  cluster: z.string().check(z.minLength(1)),
  correlationId: z.string().check(z.minLength(1)),
};
/** The fields every event's detail starts with. */
export type LifecycleCommon = z.infer<ReturnType<typeof z.strictObject<typeof common>>>;

const serviceRef = {
  ...common,
  namespace: z.string().check(z.minLength(1)),
  name: z.string().check(z.minLength(1)),
  /** Empty when the Service could not be read (a failed sync during an API outage). */
  uid: z.string(),
};
const instanceIds = z.array(z.string().check(z.regex(/^i-[0-9a-f]+$/, 'an EC2 instance ID')));

export const lifecycleEventSchemas = {
  LoadBalancerEnsured: z.strictObject({
    ...serviceRef,
    dnsName: z.string(),
    scheme: z.enum(['internal', 'internet-facing']),
    listeners: z.array(
      z.strictObject({ port: z.int(), protocol: z.string(), targetGroupArn: z.string() }),
    ),
    loadBalancerArn: z.string(),
    securityGroupId: z.optional(z.string()),
  }),
  LoadBalancerHostsUpdated: z.strictObject({
    ...serviceRef,
    added: instanceIds,
    removed: instanceIds,
  }),
  LoadBalancerDeleted: z.strictObject({
    ...serviceRef,
    loadBalancerArn: z.optional(z.string()),
  }),
  LoadBalancerSyncFailed: z.strictObject({
    ...serviceRef,
    reason: z.string(),
    terminal: z.boolean(),
    /** Seconds until the next attempt; absent when terminal (the next spec change retries). */
    retryInSeconds: z.optional(z.int().check(z.gte(0))),
  }),
  NodeSetChanged: z.strictObject({
    ...common,
    added: instanceIds,
    removed: instanceIds,
    eligibleHosts: z.int().check(z.gte(0)),
  }),
} as const;

export type LifecycleDetailType = keyof typeof lifecycleEventSchemas;
export type LifecycleDetail<T extends LifecycleDetailType> = z.infer<
  (typeof lifecycleEventSchemas)[T]
>;

/** One event as it goes on the bus. */
export type LifecycleEvent = {
  [T in LifecycleDetailType]: { readonly detailType: T; readonly detail: LifecycleDetail<T> };
}[LifecycleDetailType];

export const lifecycleDetailTypes = Object.keys(lifecycleEventSchemas) as [
  LifecycleDetailType,
  ...LifecycleDetailType[],
];

/** The JSON Schema (draft 2020-12) of one event's `detail`, as published in docs/events/. */
export function detailJsonSchema(detailType: LifecycleDetailType): Record<string, unknown> {
  return {
    $id: `https://serverless-service-controller.io/events/v${eventSchemaVersion}/${detailType}.json`,
    title: `${detailType} (detail)`,
    ...z.toJSONSchema(lifecycleEventSchemas[detailType]),
  };
}

/** Checks an event against its schema: undefined when valid, else what is wrong. */
export function lifecycleEventProblem(event: {
  detailType: string;
  detail: unknown;
}): string | undefined {
  const schema = lifecycleEventSchemas[event.detailType as LifecycleDetailType] as
    (typeof lifecycleEventSchemas)[LifecycleDetailType] | undefined;
  if (schema === undefined) return `unknown detail-type ${event.detailType}`;
  const result = schema.safeParse(event.detail);
  return result.success
    ? undefined
    : result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}
