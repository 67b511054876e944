import { expect } from 'vitest';
import { onAttach } from '../../../kit/aws-calls';
import { relative } from 'node:path';
import { callLogDirectory, enableRecording, markTestFileStarted, repositoryRoot } from './call-log';
import { addIamRecording, recordCallsOf } from './recording';

// A setup file of the projects whose AWS calls test/iam/ evaluates: records this file's calls, and
// that it ran, so that a partial run (one file, a filter) does not rewrite the full results table.
enableRecording();
onAttach(addIamRecording);
const dir = callLogDirectory();
const testPath = expect.getState().testPath;
if (dir !== undefined && testPath !== undefined) {
  markTestFileStarted(dir, testPath);
  recordCallsOf(relative(repositoryRoot, testPath));
}
