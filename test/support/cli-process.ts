import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The CLI keeps local mode's state (the embedded cluster's kubeconfig and endpoints) under the
 * temporary directory. Each test file gives its CLI processes one of their own, so files that run
 * `npm start` at the same time never read each other's cluster; the processes of one file share
 * it, as a user's terminal windows do.
 */
const cliTemporaryDirectory = mkdtempSync(join(tmpdir(), 'ssc-cli-'));

/** How the tests run the CLI as users do: node with tsx, on the sources. */
export const cliArgs = ['--import', 'tsx', 'functions/local/cli.ts'];

/** A child process with its stdout and stderr gathered as one text. */
export function startProcess(command: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(command, args, {
    env: { ...process.env, TMPDIR: cliTemporaryDirectory, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const closed = once(child, 'close').then(([code]) => code as number | null);
  return { child, output: () => output, closed };
}

/** `npm start -- <args>` without npm: the CLI in a child process. */
export function startCli(args: string[], env: Record<string, string> = {}) {
  return startProcess(process.execPath, [...cliArgs, ...args], env);
}

/** Runs the CLI to its end. */
export async function cli(args: string[], env: Record<string, string> = {}) {
  const run = startCli(args, env);
  const code = await run.closed;
  return { code, output: run.output() };
}

/** Polls `probe` until `accept` takes its value; throws naming `what` (and the last value) after `timeoutMs`. */
export async function eventually<T>(
  probe: () => Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await probe();
    if (accept(last)) return last;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 2_000)}`);
}

/** Waits until the process has printed something `pattern` matches. */
export function outputShows(
  run: { output: () => string },
  pattern: RegExp,
  what: string,
  timeoutMs?: number,
): Promise<string> {
  return eventually(
    () => Promise.resolve(run.output()),
    (output) => pattern.test(output),
    what,
    timeoutMs,
  );
}
