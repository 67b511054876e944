import { configFromEnvironment } from '../contract/controller-config';
import type { WiredRuntime } from './wiring';
import { createRuntime } from './wiring';

let runtime: WiredRuntime | undefined;

/** The runtime of this Lambda instance, built on first use from CONTROLLER_CONFIG. */
export function runtimeFromEnvironment(): WiredRuntime {
  // A bad configuration throws here with every problem named, failing the invocation visibly.
  runtime ??= createRuntime(configFromEnvironment(process.env));
  return runtime;
}
