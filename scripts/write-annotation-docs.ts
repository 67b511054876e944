import { readFileSync, writeFileSync } from 'node:fs';
import { annotationRegistry } from '../functions/nlb/model/annotations';
import {
  type AnnotationDefinition,
  type Mutability,
} from '../functions/nlb/model/annotation-types';
import { runAsScript } from '../functions/package/run-as-script';

/**
 * `npm run docs:annotations`: writes the annotation table of docs/annotations.md from the registry,
 * between the markers below. A test fails when the file differs from what this would write.
 */
export const annotationDocPath = 'docs/annotations.md';
export const tableBegin =
  '<!-- annotation-table:begin: generated from functions/nlb/model/annotations.ts by `npm run docs:annotations` -->';
export const tableEnd = '<!-- annotation-table:end -->';

/** The section of docs/annotations.md that says what each kind of change does to traffic. */
export const mutabilitySections: Record<Mutability, string> = {
  'in place': 'in-place',
  'replaces target groups (make-before-break)': 'replaces-target-groups-make-before-break',
  'replaces the load balancer': 'replaces-the-load-balancer',
  'at creation only': 'at-creation-only',
  'n/a': 'accepted-for-compatibility',
};

/** Table cells: a `|` would end the cell, even inside backticks. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

function row(definition: AnnotationDefinition): string {
  const change = `[${definition.mutability}](#${mutabilitySections[definition.mutability]})`;
  const { albc, cloudProviderAws } = definition.compared;
  return `| \`${definition.name}\` | ${cell(definition.values)} | ${cell(definition.default)} | ${change} | ${cell(definition.description)} | ${cell(albc)} | ${cell(cloudProviderAws)} |`;
}

export function annotationTable(
  registry: readonly AnnotationDefinition[] = annotationRegistry,
): string {
  return [
    '| annotation | values | default | a change after creation | what it does | in aws-load-balancer-controller | in cloud-provider-aws |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...registry.map(row),
  ].join('\n');
}

/** How a comparison cell must start: the other controller has it the same, differently or not. */
export const comparisonPattern = /^(same\b|differs: \S|not supported\b.*: \S)/;

/** The generated part of the document, between the markers; undefined when they are missing. */
export function generatedTable(doc: string): string | undefined {
  const begin = doc.indexOf(tableBegin);
  const end = doc.indexOf(tableEnd);
  if (begin < 0 || end < begin) return undefined;
  return doc.slice(begin + tableBegin.length, end).trim();
}

/** The document with its generated part replaced by `table`. */
export function withAnnotationTable(doc: string, table: string = annotationTable()): string {
  const begin = doc.indexOf(tableBegin);
  const end = doc.indexOf(tableEnd);
  if (begin < 0 || end < begin) {
    throw new Error(`${annotationDocPath} has no "${tableBegin}" … "${tableEnd}" markers`);
  }
  return `${doc.slice(0, begin + tableBegin.length)}\n${table}\n${doc.slice(end)}`;
}

if (runAsScript(import.meta.url)) {
  writeFileSync(annotationDocPath, withAnnotationTable(readFileSync(annotationDocPath, 'utf8')));
}
