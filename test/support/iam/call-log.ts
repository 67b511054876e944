import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import type { Authorization } from './request-context';

/**
 * Where the AWS calls of a test run are written, one JSON line per call, for test/iam/ to
 * evaluate against the stack's IAM policies once the suites that make them have run.
 */

/** The directory of this run's log; set by the integration, e2e and reliability global setups. */
export const callLogVariable = 'SSC_IAM_CALL_LOG';

export const repositoryRoot = fileURLToPath(new URL('../../..', import.meta.url));

/** Who makes a call: the role its client was built for, or the test (see recording.ts). */
export type Identity = 'functions' | 'forwarder' | 'operator' | 'test';

export interface RecordedCall {
  readonly identity: Identity;
  /** `ElasticLoadBalancingV2.CreateLoadBalancer` */
  readonly call: string;
  /** The test file that ran when the call was made, for failure messages. */
  readonly testFile: string;
  readonly account?: string;
  readonly region?: string;
  /** `ok`, or the error's name. */
  readonly outcome?: string;
  readonly authorizations?: readonly Authorization[];
  /** Why no request context could be built. */
  readonly problem?: string;
}

interface ProjectRun {
  readonly project: string;
  readonly files: readonly string[];
  /** Run with a test-name filter: not every test of the files ran. */
  readonly filtered: boolean;
}

export function callLogDirectory(): string | undefined {
  const dir = process.env[callLogVariable];
  return dir !== undefined && dir !== '' && existsSync(dir) ? dir : undefined;
}

const recordingKey = Symbol.for('serverless-service-controller.iamRecording');

/**
 * Setup file of the projects whose calls are evaluated: turns recording on for this test file.
 * Other projects' workers see the same environment but record nothing.
 */
export function enableRecording(): void {
  (globalThis as Record<symbol, unknown>)[recordingKey] = true;
}

/** Where this worker's calls go, if it records them. */
export function recordingDirectory(): string | undefined {
  return (globalThis as Record<symbol, unknown>)[recordingKey] === true
    ? callLogDirectory()
    : undefined;
}

/**
 * Global setup: a fresh log shared by every project of the run that records (the first one makes
 * it, and removes it when the run ends), and this project's test files, to tell a full run from a
 * partial one.
 */
export async function startCallLog(project: TestProject): Promise<() => void> {
  let owned: string | undefined;
  if (callLogDirectory() === undefined) {
    owned = mkdtempSync(join(tmpdir(), 'ssc-iam-calls-'));
    // Workers are started after global setup and inherit it.
    process.env[callLogVariable] = owned;
  }
  const dir = callLogDirectory() ?? '';
  mkdirSync(join(dir, 'projects'), { recursive: true });
  const { testFiles } = await project.globTestFiles();
  const run: ProjectRun = {
    project: project.name,
    files: testFiles.map((f) => relative(repositoryRoot, f)).sort(),
    filtered: project.vitest.config.testNamePattern !== undefined,
  };
  writeFileSync(join(dir, 'projects', `${project.name}.json`), JSON.stringify(run));
  return () => {
    if (owned !== undefined) rmSync(owned, { recursive: true, force: true });
  };
}

/** One file per process: appends from several workers never interleave. */
export function appendCall(dir: string, call: RecordedCall): void {
  appendFileSync(join(dir, `calls-${process.pid}.jsonl`), `${JSON.stringify(call)}\n`);
}

/** Setup file: this test file ran (a partial run leaves the results table alone). */
export function markTestFileStarted(dir: string, testPath: string): void {
  appendFileSync(
    join(dir, `started-${process.pid}.txt`),
    `${relative(repositoryRoot, testPath)}\n`,
  );
}

export interface CallLog {
  readonly calls: RecordedCall[];
  /** Every test file of the integration, e2e and reliability projects ran, unfiltered. */
  readonly complete: boolean;
  readonly missingFiles: readonly string[];
}

export function readCallLog(dir: string): CallLog {
  const names = readdirSync(dir);
  const lines = (prefix: string) =>
    names
      .filter((n) => n.startsWith(prefix))
      .flatMap((n) => readFileSync(join(dir, n), 'utf8').split('\n'))
      .filter((l) => l !== '');
  const calls = lines('calls-').map((l) => JSON.parse(l) as RecordedCall);
  const started = new Set(lines('started-'));
  const projectsDir = join(dir, 'projects');
  const runs = existsSync(projectsDir)
    ? readdirSync(projectsDir).map(
        (n) => JSON.parse(readFileSync(join(projectsDir, n), 'utf8')) as ProjectRun,
      )
    : [];
  const wanted = ['integration', 'e2e', 'reliability'];
  const missingFiles = wanted.flatMap((name) => {
    const run = runs.find((r) => r.project === name);
    if (run === undefined) return [`(the ${name} project)`];
    if (run.filtered) return [`(the ${name} project ran with a test-name filter)`];
    return run.files.filter((f) => !started.has(f));
  });
  return { calls, complete: missingFiles.length === 0, missingFiles };
}
