import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fileDurations } from '../../../scripts/write-file-durations';

describe('test/support/file-durations.json', () => {
  it('names only test files that exist, so the order of a clean checkout follows real files', () => {
    const recorded = JSON.parse(readFileSync('test/support/file-durations.json', 'utf8')) as Record<
      string,
      number
    >;
    const missing = Object.keys(recorded).filter((file) => !existsSync(file));
    expect(missing).toEqual([]);
    expect(Object.values(recorded).every((s) => Number.isInteger(s) && s >= 5)).toBe(true);
  });

  it('is written from a Vitest JSON report: seconds per file, short files left out', () => {
    const report = {
      testResults: [
        { name: '/repo/test/e2e/long.test.ts', startTime: 1_000, endTime: 61_400 },
        { name: '/repo/test/unit/short.test.ts', startTime: 1_000, endTime: 4_000 },
        { name: '/repo/test/infra/a.test.ts', startTime: 0, endTime: 5_600 },
      ],
    };
    expect(fileDurations(report, '/repo')).toEqual({
      'test/e2e/long.test.ts': 60,
      'test/infra/a.test.ts': 6,
    });
  });
});
