import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AwsAccess } from './aws-resources';
import { UsageError } from './cli-usage';

/**
 * The embedded run's claim on this machine (issue 35): one `npm start` at a time owns the
 * simulated cluster that the CLI's other commands (`apply`, `node add`, …) find. Its kubeconfigs
 * live in a directory of their own, made for that run and removed with it, so a second run can
 * never overwrite the files a first run's kubectl sessions use. A second run while the first is
 * alive is refused by name; a claim whose process is gone (killed, power cut) is taken over.
 */
export interface EmbeddedRun {
  /** The run's own directory: its kubeconfigs. */
  readonly dir: string;
  /** Tells the CLI's other commands where the simulated cluster is. */
  publish(state: EmbeddedState): void;
  /** Gives the claim up and removes the run's directory (only this run's). */
  release(): void;
}

export interface EmbeddedState {
  readonly kubeconfig: string;
  readonly aws: AwsAccess;
  readonly clusterName: string;
}

interface Claim extends Partial<EmbeddedState> {
  readonly pid: number;
  readonly dir: string;
}

/** Under the temporary directory, so a different TMPDIR gives a separate set of runs. */
function root(): string {
  return join(tmpdir(), 'serverless-service-controller');
}

function claimFile(): string {
  return join(root(), 'embedded.json');
}

/** Claims the embedded run for this process, or refuses while another live run holds it. */
export function claimEmbeddedRun(): EmbeddedRun {
  mkdirSync(root(), { recursive: true });
  const dir = mkdtempSync(join(root(), 'run-'));
  const claim: Claim = { pid: process.pid, dir };
  try {
    writeClaim(claim, { exclusive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    const held = readClaim();
    if (held !== undefined && isAlive(held.pid)) {
      rmSync(dir, { recursive: true, force: true });
      throw new UsageError(
        `another \`npm start\` (pid ${held.pid}) is running the simulated cluster` +
          `${held.kubeconfig ? ` (kubeconfig ${held.kubeconfig})` : ''}; stop it first (Ctrl-C in ` +
          'its terminal), or give this run a TMPDIR of its own',
      );
    }
    // Its process is gone: the claim is stale, and so is its directory.
    if (held !== undefined) rmSync(held.dir, { recursive: true, force: true });
    unlinkSync(claimFile());
    writeClaim(claim, { exclusive: true });
  }
  let current: Claim = claim;
  return {
    dir,
    publish(state) {
      current = { ...state, pid: process.pid, dir };
      writeClaim(current, { exclusive: false });
    },
    release() {
      if (readClaim()?.pid === process.pid) unlinkSync(claimFile());
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The simulated cluster of the live embedded run, if there is one. */
export function liveEmbeddedState(): EmbeddedState | undefined {
  const claim = readClaim();
  if (claim === undefined || !isAlive(claim.pid)) return undefined;
  const { kubeconfig, aws, clusterName } = claim;
  if (kubeconfig === undefined || aws === undefined || clusterName === undefined) return undefined;
  return { kubeconfig, aws, clusterName };
}

function writeClaim(claim: Claim, options: { exclusive: boolean }): void {
  writeFileSync(claimFile(), JSON.stringify(claim), {
    flag: options.exclusive ? 'wx' : 'w',
    mode: 0o600,
  });
}

function readClaim(): Claim | undefined {
  try {
    const value = JSON.parse(readFileSync(claimFile(), 'utf8')) as Partial<Claim>;
    return typeof value.pid === 'number' && typeof value.dir === 'string'
      ? (value as Claim)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Signal 0 checks that the process exists; EPERM means it does, under another user. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
