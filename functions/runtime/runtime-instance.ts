import { configFromEnvironment } from '../config';
import type { RuntimeContext } from './context';
import { createRuntime } from './wiring';

let runtime: RuntimeContext | undefined;

/** The runtime of this Lambda instance, built on first use from CONTROLLER_CONFIG. */
export function runtimeFromEnvironment(): RuntimeContext {
  // A bad configuration throws here with every problem named, failing the invocation visibly.
  runtime ??= createRuntime(configFromEnvironment(process.env));
  return runtime;
}
