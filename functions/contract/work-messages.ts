import * as z from 'zod/mini';
import './zod-messages';

/** Messages larger than this are not ours: the largest (a node tick, a heartbeat) is ~200 bytes. */
export const maxMessageBytes = 4096;

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
 * - `targets`: the endpoints of a Service whose NLB targets pods (`nlb-target-type: ip`) changed;
 *   targets sync, which reads the live EndpointSlices (issue 36). Read and sent from the same
 *   release, an exception to docs/upgrades.md's rule that is harmless: the forwarder sends it only
 *   for Services with pod targets, which an older runtime refuses anyway, and upgrades put the
 *   functions first.
 * - `resync`: drift repair; full sync ignoring the checkpoint, when `pass` names the sweep run
 *   recorded in the state table (or the one before), else an ordinary `service` sync: a flood of
 *   forged resyncs costs checkpoint hits, not AWS reads.
 * - `node`: a node changed (or the node-sync timer ticked); handed to node sync.
 * - `event`: names (by id) a lifecycle event EventBridge did not take, kept in the state table
 *   until it is published: the queue never carries an event itself, so whoever can send to the
 *   queue cannot have the functions publish one (a forged id names nothing).
 * - `heartbeat`: the forwarder is alive; carries the sends that failed since its last heartbeat
 *   got through and the keys it holds, which the functions publish as metrics (a quiet forwarder
 *   alarms), and, from the release after 0.1, its lists and watches that failed meanwhile and how
 *   many watches are failing (a deaf forwarder alarms). Optional: a 0.1 forwarder sends neither.
 */
export const workMessageSchema = z.discriminatedUnion('kind', [
  z.strictObject({ v: z.literal(1), kind: z.literal('service'), key: serviceKey, reason }),
  z.strictObject({ v: z.literal(1), kind: z.literal('hosts'), key: serviceKey, reason }),
  z.strictObject({ v: z.literal(1), kind: z.literal('targets'), key: serviceKey, reason }),
  z.strictObject({
    v: z.literal(1),
    kind: z.literal('resync'),
    key: serviceKey,
    reason,
    /** The sweep run that sent it: only a run recorded in the state table forces a full sync. */
    pass: z.optional(z.uuid()),
  }),
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
    watchFailures: z.optional(intIn(0, 1_000_000_000)),
    failingWatches: z.optional(intIn(0, 16)),
  }),
  z.strictObject({ v: z.literal(1), kind: z.literal('event'), id: z.uuid() }),
]);

export type WorkMessage = z.infer<typeof workMessageSchema>;
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
  if (result.success) return { ok: true, message: result.data };
  return {
    ok: false,
    problem: result.error.issues
      .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
      .join('; ')
      .slice(0, 1024),
  };
}
