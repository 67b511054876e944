import type { TestProject } from 'vitest/node';
import { startMotoServer } from '../../functions/local/moto-server';
import { startCallLog } from './iam/call-log';

declare module 'vitest' {
  export interface ProvidedContext {
    awsEndpoint: string;
  }
}

/**
 * One moto server for the whole integration run; test files isolate themselves by account. The
 * run's IAM call log is started here too: test/iam/ evaluates the calls these suites make.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stopCallLog = await startCallLog(project);
  const moto = await startMotoServer();
  project.provide('awsEndpoint', moto.endpoint);
  return async () => {
    await moto.stop();
    stopCallLog();
  };
}
