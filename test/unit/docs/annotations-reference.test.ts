import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { annotationRegistry, parseAnnotations } from '../../../functions/nlb/model/annotations';
import { awsPrefix } from '../../../functions/nlb/model/annotation-types';
import { ownershipTags } from '../../../functions/nlb/model/naming';
import { labelsDigestKey } from '../../../functions/forwarder/fingerprints';
import {
  annotationTable,
  generatedTable,
  mutabilitySections,
} from '../../../scripts/write-annotation-docs';
import { checkpointFor } from '../../../functions/core/checkpoint';
import {
  classFinalizer,
  defaultClaimPolicy,
  defaultLoadBalancerClass,
} from '../../../functions/core/claim';
import type { Service } from '../../../functions/core/objects';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const doc = readFileSync(join(root, 'docs/annotations.md'), 'utf8');

/**
 * Keys in the two domains whose annotations the controller could read. The look-behind skips
 * URLs (`https://serverless-service-controller.io/events/…`) and longer domains.
 */
const keyPattern =
  /(?<![\w./-])(?:service\.beta\.kubernetes\.io|serverless-service-controller\.io)\/[A-Za-z0-9][-A-Za-z0-9_.]*/g;

/** Keys in those domains that name something other than an annotation. */
const notAnnotations = new Set<string>([
  ...Object.values(ownershipTags),
  // A key in the forwarder's compact copy of a Node, never on a Kubernetes object.
  labelsDigestKey,
  classFinalizer,
  defaultLoadBalancerClass,
]);

/**
 * Documented, yet read by no code: any annotation change misses the checkpoint, and this is the
 * name the documentation suggests for forcing a full sync. Proved below.
 */
const resyncAnnotation = 'serverless-service-controller.io/resync';

/** Stands for a part of a template the scanner cannot resolve; no key can run across it. */
const unresolved = '\u0000';

/** Whole keys only: a prefix such as `…/aws-load-balancer-` (from an unresolved template) is not one. */
function keysIn(text: string): string[] {
  return [...text.matchAll(keyPattern)]
    .map((match) => match[0].replace(/\.+$/, ''))
    .filter((key) => !key.endsWith('-'));
}

/**
 * Every annotation-like key a TypeScript source spells out: string literals, templates and `+`
 * concatenations with the file's string constants (and `awsPrefix`) filled in, and `awsName(…)`.
 */
function keysInSource(fileName: string, source: string): Set<string> {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const constants = new Map<string, string | undefined>([['awsPrefix', awsPrefix]]);
  const collectConstants = (node: ts.Node): void => {
    if (
      ts.isVariableDeclaration(node) &&
      ts.isIdentifier(node.name) &&
      node.initializer !== undefined &&
      ts.isStringLiteralLike(node.initializer) &&
      (ts.getCombinedNodeFlags(node) & ts.NodeFlags.Const) !== 0
    ) {
      const name = node.name.text;
      const value = node.initializer.text;
      // The same name bound to two values in one file is ambiguous: resolve it to neither.
      constants.set(name, constants.has(name) && constants.get(name) !== value ? undefined : value);
    }
    ts.forEachChild(node, collectConstants);
  };
  collectConstants(file);

  const textOf = (node: ts.Expression): string => {
    if (ts.isStringLiteralLike(node)) return node.text;
    if (ts.isParenthesizedExpression(node)) return textOf(node.expression);
    if (ts.isIdentifier(node)) return constants.get(node.text) ?? unresolved;
    if (ts.isTemplateExpression(node)) {
      return (
        node.head.text +
        node.templateSpans.map((span) => textOf(span.expression) + span.literal.text).join('')
      );
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      return textOf(node.left) + textOf(node.right);
    }
    if (
      ts.isCallExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'awsName' &&
      node.arguments.length === 1
    ) {
      return awsPrefix + textOf(node.arguments[0] as ts.Expression);
    }
    return unresolved;
  };
  const keys = new Set<string>();
  const visit = (node: ts.Node): void => {
    if (
      ts.isStringLiteralLike(node) ||
      ts.isTemplateExpression(node) ||
      ts.isBinaryExpression(node) ||
      ts.isCallExpression(node)
    ) {
      for (const key of keysIn(textOf(node))) keys.add(key);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return keys;
}

function codeKeys(): Set<string> {
  const dir = join(root, 'functions');
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter(
    (path) => path.endsWith('.ts') && !path.endsWith('.d.ts'),
  );
  const keys = new Set<string>();
  for (const path of files) {
    for (const key of keysInSource(path, readFileSync(join(dir, path), 'utf8'))) keys.add(key);
  }
  return keys;
}

const annotationsInCode = [...codeKeys()].filter((key) => !notAnnotations.has(key)).sort();
const keysInDoc = new Set(keysIn(doc));

describe('docs/annotations.md', () => {
  it('holds the annotation table the registry generates (npm run docs:annotations)', () => {
    expect(generatedTable(doc), 'the annotation-table markers are missing').toBeDefined();
    expect(generatedTable(doc)).toBe(annotationTable());
  });

  it('explains every kind of change the table links to', () => {
    const headings = [...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
      (m[1] ?? '')
        .toLowerCase()
        .replace(/[^a-z0-9 -]/g, '')
        .replace(/ /g, '-'),
    );
    const used = new Set(annotationRegistry.map((definition) => definition.mutability));
    for (const mutability of used) {
      expect(headings, mutability).toContain(mutabilitySections[mutability]);
    }
  });

  it('documents every annotation the code reads', () => {
    const undocumented = annotationsInCode.filter((key) => !keysInDoc.has(key));
    expect(undocumented, 'add these to the registry or to docs/annotations.md').toEqual([]);
  });

  it('documents no annotation the code does not read', () => {
    const known = new Set([...annotationsInCode, ...notAnnotations, resyncAnnotation]);
    // A suffixed annotation (`…listener-attributes.TCP-80`) is read by its prefix.
    const suffixed = (key: string) =>
      annotationRegistry.some((d) => d.namePrefix !== undefined && key.startsWith(d.namePrefix));
    const unknown = [...keysInDoc].filter((key) => !known.has(key) && !suffixed(key)).sort();
    expect(unknown, 'docs/annotations.md names annotations no code reads').toEqual([]);
  });

  it('documents the resync annotation, which works because any annotation change misses the checkpoint', () => {
    expect(keysInDoc.has(resyncAnnotation)).toBe(true);
    const service: Service = {
      metadata: { namespace: 'default', name: 'hello', uid: 'u1', annotations: {} },
      spec: { type: 'LoadBalancer', ports: [{ port: 80, nodePort: 30080 }] },
    };
    const touched: Service = {
      ...service,
      metadata: { ...service.metadata, annotations: { [resyncAnnotation]: '1700000000' } },
    };
    const checkpoint = (s: Service) =>
      checkpointFor({
        service: s,
        hostsHash: 'h',
        claim: defaultClaimPolicy,
        providerFingerprint: 'p',
      });
    expect(checkpoint(touched)).not.toBe(checkpoint(service));
    expect(() => parseAnnotations(touched)).not.toThrow();
  });
});

describe('the annotation scanner', () => {
  it('finds every annotation of the registry in the code, so it can see what the code reads', () => {
    // A suffixed annotation is spelled in code as its prefix (the scanner drops the final dot).
    const missing = annotationRegistry
      .map((definition) => definition.namePrefix?.replace(/\.$/, '') ?? definition.name)
      .filter((name) => !annotationsInCode.includes(name));
    expect(missing).toEqual([]);
  });

  it('finds keys in literals, in templates and concatenations of constants, and in awsName calls', () => {
    const source = [
      "const a = 'service.beta.kubernetes.io/literal';",
      'const b = `${awsPrefix}from-template`;',
      "const prefix = 'annotation serverless-service-controller.io/';",
      'const c = `${prefix}from-local-constant`;',
      "const d = awsPrefix + 'from-concatenation';",
      "const e = awsName('from-call');",
      'const f = `${awsPrefix}${unknown}`;',
      "const g = 'https://serverless-service-controller.io/events/v1/x.json';",
    ].join('\n');
    expect([...keysInSource('sample.ts', source)].sort()).toEqual(
      [
        `${awsPrefix}from-call`,
        `${awsPrefix}from-concatenation`,
        `${awsPrefix}from-template`,
        'service.beta.kubernetes.io/literal',
        'serverless-service-controller.io/from-local-constant',
      ].sort(),
    );
  });
});
