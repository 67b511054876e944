import { describe, expect, it } from 'vitest';
import { ListScanner } from '../../../functions/kube/list-stream';

/** Feeds `text` in the given chunks; returns the items (parsed) and the rest of the document. */
function scan(chunks: readonly string[]): { items: unknown[]; rest: unknown } {
  const scanner = new ListScanner();
  const items = chunks.flatMap((chunk) => scanner.push(chunk)).map((t) => JSON.parse(t) as unknown);
  return { items, rest: scanner.finish() };
}

/** Every way to cut `text` in two, and one character at a time. */
function cuts(text: string): string[][] {
  const ways = Array.from({ length: text.length + 1 }, (_, i) => [text.slice(0, i), text.slice(i)]);
  ways.push([...text]);
  return ways;
}

const tricky = {
  kind: 'ServiceList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '42', continue: 'eyJ9"]}' },
  items: [
    {
      metadata: { name: 'a', annotations: { 'x/y': '{"items":[1,2]} \\" ] } [ {', é: '☃' } },
      spec: { ports: [{ port: 80 }], loadBalancerSourceRanges: ['10.0.0.0/8'] },
    },
    { metadata: { name: 'b\\', labels: { items: '[' } }, spec: {} },
    {},
  ],
  trailer: { items: ['not the list'] },
};

describe('list scanner', () => {
  it('splits a list into its items and the rest, wherever the chunks are cut', () => {
    const text = JSON.stringify(tricky, null, 1);
    const { items, ...rest } = tricky;
    for (const chunks of cuts(text)) {
      expect(scan(chunks)).toEqual({ items, rest: { ...rest, items: [] } });
    }
  });

  it('hands out each item as soon as its last character has arrived', () => {
    const text = JSON.stringify(tricky);
    const scanner = new ListScanner();
    const endOfFirst = text.indexOf(',{"metadata":{"name":"b');
    expect(scanner.push(text.slice(0, endOfFirst - 1))).toEqual([]);
    const first = scanner.push(text.slice(endOfFirst - 1, endOfFirst));
    expect(first.map((t) => JSON.parse(t) as unknown)).toEqual([tricky.items[0]]);
    expect(scanner.push(text.slice(endOfFirst))).toHaveLength(2);
  });

  it('reads lists without items, empty or null', () => {
    expect(scan(['{"metadata":{},"items":[]}'])).toEqual({
      items: [],
      rest: { metadata: {}, items: [] },
    });
    expect(scan(['{"items":null,"metadata":{"resourceVersion":"1"}}']).items).toEqual([]);
  });

  it('refuses items that are not objects, and a document that ends early', () => {
    for (const bad of ['{"items":[1]}', '{"items":["a"]}', '{"items":[[]]}', '{"items":[{},true]}'])
      expect(() => scan([bad]), bad).toThrow(/list items must be objects/);
    expect(() => scan(['{"items":[{"metadata":{}'])).toThrow(/ended early/);
    expect(() => scan(['{"items":[]}}'])).toThrow(/unbalanced/);
  });
});
