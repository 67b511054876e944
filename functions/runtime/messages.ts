import * as z from 'zod/mini';
import '../zod-messages';
import {
  lifecycleDetailTypes,
  lifecycleEventProblem,
  type LifecycleEvent,
} from '../events/lifecycle-events';

/**
 * Messages larger than this are not ours: keys are a few hundred bytes, a lifecycle event waiting
 * for EventBridge at most a few kilobytes (50 listeners with their target group ARNs).
 */
export const maxMessageBytes = 16384;

const serviceKey = z
  .string()
  .check(
    z.regex(
      /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
      'namespace/name',
    ),
  );
const reason = z.optional(z.string().check(z.maxLength(200)));
const intIn = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));

/**
 * The work queue's messages (`{v, kind, key, reason}`), keys only: the sync re-reads the world (S4).
 * - `service`: a Service changed; full sync.
 * - `hosts`: node sync found the Service's LB has other hosts; host update.
 * - `resync`: drift repair; full sync ignoring the checkpoint.
 * - `node`: a node changed (or the node-sync timer ticked); handed to node sync.
 * - `event`: a lifecycle event EventBridge did not take; offered again (checked against its schema).
 * - `heartbeat`: the forwarder is alive; carries the sends that failed since its last heartbeat
 *   got through and the keys it holds, which the functions publish as metrics (a quiet forwarder
 *   alarms).
 */
export const workMessageSchema = z.discriminatedUnion('kind', [
  z.strictObject({ v: z.literal(1), kind: z.literal('service'), key: serviceKey, reason }),
  z.strictObject({ v: z.literal(1), kind: z.literal('hosts'), key: serviceKey, reason }),
  z.strictObject({ v: z.literal(1), kind: z.literal('resync'), key: serviceKey, reason }),
  z.strictObject({
    v: z.literal(1),
    kind: z.literal('node'),
    reason,
    chain: z.optional(z.string().check(z.maxLength(64))),
  }),
  z.strictObject({
    v: z.literal(1),
    kind: z.literal('heartbeat'),
    sendFailures: intIn(0, 1_000_000_000),
    pending: intIn(0, 1_000_000_000),
  }),
  z.strictObject({
    v: z.literal(1),
    kind: z.literal('event'),
    event: z.strictObject({
      detailType: z.enum(lifecycleDetailTypes),
      detail: z.record(z.string(), z.unknown()),
    }),
  }),
]);

type ParsedWorkMessage = z.infer<typeof workMessageSchema>;
/** The event message's detail is checked against its own schema after the envelope parses. */
export type WorkMessage =
  | Exclude<ParsedWorkMessage, { kind: 'event' }>
  | { readonly v: 1; readonly kind: 'event'; readonly event: LifecycleEvent };
export type ServiceWorkMessage = Extract<WorkMessage, { key: string }>;

export type ParsedMessage = { ok: true; message: WorkMessage } | { ok: false; problem: string };

/** Parses a message body; never throws. */
export function parseWorkMessage(body: string): ParsedMessage {
  if (Buffer.byteLength(body) > maxMessageBytes)
    return { ok: false, problem: `larger than ${maxMessageBytes} bytes` };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return { ok: false, problem: 'not JSON' };
  }
  const result = workMessageSchema.safeParse(json);
  if (result.success) {
    const message = result.data;
    if (message.kind !== 'event') return { ok: true, message };
    const problem = lifecycleEventProblem(message.event);
    return problem === undefined
      ? { ok: true, message: { v: 1, kind: 'event', event: message.event as LifecycleEvent } }
      : { ok: false, problem: `event.detail: ${problem}` };
  }
  return {
    ok: false,
    problem: result.error.issues
      .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
      .join('; '),
  };
}
