import type { TestProject } from 'vitest/node';
import { startMotoServer } from '../../functions/local/moto-server';

declare module 'vitest' {
  export interface ProvidedContext {
    awsEndpoint: string;
  }
}

/** One moto server for the whole integration run; test files isolate themselves by account. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const moto = await startMotoServer();
  project.provide('awsEndpoint', moto.endpoint);
  return () => moto.stop();
}
