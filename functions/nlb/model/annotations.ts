import { clipped, joinProblems, quoted } from '../../core/echo';
import { TerminalError } from '../../core/errors';
import type { Service } from '../../core/objects';
import { annotationSizeProblems } from '../../core/service-limits';
import { addressAndAccessAnnotations } from './annotations-addresses-and-access';
import { attributeAnnotations } from './annotations-attributes';
import { healthCheckAnnotations } from './annotations-health-checks';
import { listenerAnnotations } from './annotations-listeners';
import { placementAnnotations } from './annotations-placement';
import { awsPrefix, type AnnotationDefinition, type LoadBalancerOptions } from './annotation-types';
import { awsName, bareRecord } from './annotation-values';

/**
 * Every supported annotation, in the order docs/annotations.md lists them: the registry drives
 * validation and the user documentation (scripts/write-annotation-docs.ts). The definitions live
 * by subject in annotations-*.ts; their value parsers in annotation-values.ts.
 */
export const annotationRegistry: readonly AnnotationDefinition[] = [
  ...placementAnnotations,
  ...healthCheckAnnotations,
  ...attributeAnnotations,
  ...listenerAnnotations,
  ...addressAndAccessAnnotations,
];

const byName = new Map(annotationRegistry.map((definition) => [definition.name, definition]));
const byPrefix = annotationRegistry.filter((definition) => definition.namePrefix !== undefined);

/** The definition of an annotation: by its exact name, or by the prefix of a suffixed one. */
function definitionOf(name: string): AnnotationDefinition | undefined {
  return byName.get(name) ?? byPrefix.find((d) => name.startsWith(d.namePrefix ?? '\0'));
}

/**
 * Parses and validates the Service's load balancer annotations. Unknown annotations under the
 * `aws-load-balancer-` prefix are errors too: silently ignoring one the user relies on is worse.
 * Sizes are checked first, so no oversized value is split or parsed. Throws a TerminalError
 * naming every bad annotation and value, each value cut short.
 */
export function parseAnnotations(service: Service): LoadBalancerOptions {
  const annotations = service.metadata?.annotations ?? {};
  const tooLarge = annotationSizeProblems(annotations);
  if (tooLarge.length > 0) throw new TerminalError(tooLarge.join('; '));
  const options: LoadBalancerOptions = {
    healthCheck: {},
    additionalTags: bareRecord(),
    targetGroupAttributes: bareRecord(),
    proxyProtocol: false,
    certificateArns: [],
    backendProtocol: 'tcp',
  };
  const problems: string[] = [];
  // The scheme annotation is applied before the legacy `internal` one so that it wins.
  const names = Object.keys(annotations).sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  for (const name of names) {
    const value = annotations[name] ?? '';
    const definition = definitionOf(name);
    if (definition === undefined) {
      if (name.startsWith(awsPrefix)) {
        problems.push(`annotation ${clipped(name, annotationNameChars)} is not supported`);
      }
      continue;
    }
    const problem = definition.apply(value.trim(), options, name);
    if (problem !== undefined)
      problems.push(`annotation ${name}: invalid value ${quoted(value)}: ${problem}`);
  }
  if (problems.length > 0) throw new TerminalError(joinProblems(problems));
  return options;
}

/** The longest annotation name Kubernetes allows (a 253-character prefix, "/" and 63). */
const annotationNameChars = 317;

function order(name: string): number {
  return name === awsName('scheme') ? 0 : 1;
}
