import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  eventSource,
  lifecycleDetailTypes,
  lifecycleEventProblem,
} from '../../../functions/contract/lifecycle-events';
import { schemaFiles } from '../../../scripts/write-event-schemas';

const example = (type: string) =>
  JSON.parse(readFileSync(`docs/events/examples/${type}.json`, 'utf8')) as {
    source: string;
    'detail-type': string;
    detail: unknown;
  };

describe('lifecycle events', () => {
  it('docs/events/v1 holds exactly the schemas the code generates (npm run events:schemas)', () => {
    for (const [path, text] of Object.entries(schemaFiles())) {
      expect(JSON.parse(readFileSync(path, 'utf8')), path).toEqual(JSON.parse(text));
    }
  });

  it('every detail-type has an example that its schema accepts, and a row in the README', () => {
    const readme = readFileSync('docs/events/README.md', 'utf8');
    for (const type of lifecycleDetailTypes) {
      const event = example(type);
      expect(event.source).toBe(eventSource);
      expect(event['detail-type']).toBe(type);
      expect(lifecycleEventProblem({ detailType: type, detail: event.detail }), type).toBe(
        undefined,
      );
      expect(readme).toContain(`| \`${type}\``);
    }
  });

  it('names what is wrong with a detail that breaks its schema', () => {
    const { detail } = example('LoadBalancerHostsUpdated') as { detail: Record<string, unknown> };
    expect(
      lifecycleEventProblem({
        detailType: 'LoadBalancerHostsUpdated',
        detail: { ...detail, added: ['node-1'], extra: true },
      }),
    ).toMatch(/added\.0: .*instance ID[\s\S]*extra|extra[\s\S]*added\.0/);
    expect(lifecycleEventProblem({ detailType: 'Nope', detail: {} })).toBe(
      'unknown detail-type Nope',
    );
  });
});
