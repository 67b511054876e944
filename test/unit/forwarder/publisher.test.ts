import { describe, expect, it, vi } from 'vitest';
import type { WorkMessage } from '../../../functions/contract/work-messages';
import { Publisher } from '../../../functions/forwarder/publisher';

function publisher() {
  const sent: WorkMessage[] = [];
  const p = new Publisher(
    // eslint-disable-next-line @typescript-eslint/require-await -- the queue's shape
    async (messages) => {
      sent.push(...messages);
    },
    { capacity: 100, maxBackoffMs: 10, sleep: () => Promise.resolve() },
  );
  return { p, sent };
}

const targets = (key: string): WorkMessage => ({ v: 1, kind: 'targets', key });
const service = (key: string): WorkMessage => ({ v: 1, kind: 'service', key });
const lines = (messages: WorkMessage[]) =>
  messages.map((m) => `${m.kind} ${'key' in m ? m.key : ''}`).sort();

describe('the publisher', () => {
  it('holds one targets message per key, as it does service messages', async () => {
    const { p, sent } = publisher();
    await p.enqueue(targets('a/web'));
    await p.enqueue(targets('a/web'));
    await p.enqueue(targets('b/web'));
    expect(p.depth).toBe(2);
    p.start();
    await p.stop(1000);
    expect(lines(sent)).toEqual(['targets a/web', 'targets b/web']);
  });

  it('lets a pending service message stand for the targets message of its key, either way round', async () => {
    const { p, sent } = publisher();
    await p.enqueue(service('a/web'));
    await p.enqueue(targets('a/web'));
    await p.enqueue(targets('a/api'));
    await p.enqueue(service('a/api'));
    await p.enqueue(targets('a/other'));
    expect(p.depth).toBe(3);
    p.start();
    await p.stop(1000);
    expect(lines(sent)).toEqual(['service a/api', 'service a/web', 'targets a/other']);
    // Once the service message is sent, a new slice change is work again.
    await p.enqueue(targets('a/web'));
    expect(p.depth).toBe(1);
  });

  it('sends a service message again when a slice changes while it is in flight', async () => {
    const sent: WorkMessage[] = [];
    let answer: () => void = () => undefined;
    let first = true;
    const p = new Publisher(
      async (messages) => {
        sent.push(...messages);
        // The first send is held open: its sync may have read the slices already.
        if (first) {
          first = false;
          await new Promise<void>((resolve) => (answer = resolve));
        }
      },
      { capacity: 100, maxBackoffMs: 10, sleep: () => Promise.resolve() },
    );
    await p.enqueue(service('a/web'));
    p.start();
    await vi.waitFor(() => expect(sent).toHaveLength(1));
    await p.enqueue(targets('a/web'));
    answer();
    await p.stop(1000);
    expect(lines(sent)).toEqual(['service a/web', 'service a/web']);
  });
});
