import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Starts the longest test files first, whatever their project. Vitest's own order runs one
 * project's files after another's (alphabetically) within a group order, so on two cores the
 * package test and the reliability suite's long files started last and ran alone at the end of
 * the run, one core idle. Longest first is the classic way to keep the workers evenly busy to the
 * end. A file's length is its last duration in Vitest's cache when there is one (a developer's
 * machine), else the seconds `file-durations.json` records from a full run on this machine class
 * (CI starts from a clean checkout), else a second or two: the many short files fill the gaps.
 */
const recorded = JSON.parse(
  readFileSync(new URL('file-durations.json', import.meta.url), 'utf8'),
) as Record<string, number>;

export class LongestFirst extends BaseSequencer {
  override sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const seconds = (spec: TestSpecification): number => {
      const cached = this.ctx.cache.getTestSpecificationResult(spec)?.duration;
      if (cached !== undefined && cached > 0) return cached / 1000;
      return recorded[relative(root, spec.moduleId)] ?? 1;
    };
    const cost = new Map(files.map((spec) => [spec, seconds(spec)]));
    const group = (spec: TestSpecification) => spec.project.config.sequence.groupOrder;
    return Promise.resolve(
      [...files].sort((a, b) => group(a) - group(b) || (cost.get(b) ?? 0) - (cost.get(a) ?? 0)),
    );
  }
}
