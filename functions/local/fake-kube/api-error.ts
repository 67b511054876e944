import type { JsonObject } from './patches';

/** An error the API server reports as a `Status` object. */
export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    /** The Status body's `details` (which object the error is about), when there is one. */
    readonly details?: JsonObject,
  ) {
    super(message);
  }
}
