import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { runAsScript } from '../functions/package/run-as-script';

/**
 * `npm run test:durations -- REPORT`: turns a Vitest JSON report of a full run
 * (`npx vitest run --reporter=json --outputFile=REPORT`) into test/support/file-durations.json,
 * the seconds test/support/longest-first.ts orders a clean checkout's files by. Files under five
 * seconds are left out: they fill the gaps whatever their order.
 */
interface JsonReport {
  readonly testResults: readonly {
    readonly name: string;
    readonly startTime: number;
    readonly endTime: number;
  }[];
}

export function fileDurations(report: JsonReport, root: string): Record<string, number> {
  const seconds = report.testResults
    .map((r) => [relative(root, r.name), Math.round((r.endTime - r.startTime) / 1000)] as const)
    .filter(([, s]) => s >= 5)
    .sort(([a], [b]) => a.localeCompare(b));
  return Object.fromEntries(seconds);
}

if (runAsScript(import.meta.url)) {
  const path = process.argv[2];
  if (path === undefined) throw new Error('usage: npm run test:durations -- REPORT.json');
  const report = JSON.parse(readFileSync(path, 'utf8')) as JsonReport;
  const durations = fileDurations(report, process.cwd());
  writeFileSync('test/support/file-durations.json', `${JSON.stringify(durations, null, 2)}\n`);
}
