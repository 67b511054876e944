import * as z from 'zod/mini';
import '../zod-messages';

/** Messages larger than this are not ours: ours are a few hundred bytes. */
export const maxMessageBytes = 2048;

const serviceKey = z
  .string()
  .check(
    z.regex(
      /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
      'namespace/name',
    ),
  );
const reason = z.optional(z.string().check(z.maxLength(200)));

/**
 * The work queue's messages (`{v, kind, key, reason}`), keys only: the sync re-reads the world (S4).
 * - `service`: a Service changed; full sync.
 * - `hosts`: node sync found the Service's LB has other hosts; host update.
 * - `resync`: drift repair; full sync ignoring the checkpoint.
 * - `node`: a node changed (or the node-sync timer ticked); handed to node sync.
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
      .join('; '),
  };
}
