import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import type { AwsAccess } from './aws-resources';
import { UsageError } from './cli-usage';

/**
 * The embedded run's claim on this machine (issue 35): one `npm start` at a time owns the
 * simulated cluster that the CLI's other commands (`apply`, `node add`, …) find. Its kubeconfigs
 * live in a directory of their own, made for that run and removed with it, so a second run can
 * never overwrite the files a first run's kubectl sessions use. A second run while the first is
 * alive is refused, naming its pid; a claim whose process is gone (killed, power cut) is taken over.
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
  const base = ownRoot();
  const dir = mkdtempSync(join(base, 'run-'));
  const claim: Claim = { pid: process.pid, dir };
  try {
    if (!createClaim(claim)) {
      const held = readClaim();
      if (held === 'unreadable' || (held !== undefined && isAlive(held.pid))) {
        throw new UsageError(
          held === 'unreadable'
            ? `the claim ${claimFile()} of another \`npm start\` cannot be read; if no other run is going, remove it`
            : `another \`npm start\` (pid ${held.pid}) is running the simulated cluster` +
                `${held.kubeconfig ? ` (kubeconfig ${held.kubeconfig})` : ''}; stop it first (Ctrl-C in ` +
                `its terminal), or give this run a TMPDIR of its own (claim: ${claimFile()})`,
        );
      }
      // Its process is gone: the claim is stale, and so is its directory (only ever one of ours).
      if (held !== undefined && isUnder(base, held.dir)) {
        rmSync(held.dir, { recursive: true, force: true });
      }
      rmSync(claimFile(), { force: true });
      if (!createClaim(claim)) {
        throw new UsageError(
          `another \`npm start\` claimed the simulated cluster at the same moment (${claimFile()}); stop it first`,
        );
      }
    }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    dir,
    publish(state) {
      replaceClaim({ ...state, pid: process.pid, dir });
    },
    release() {
      const held = readClaim();
      if (held !== 'unreadable' && held?.pid === process.pid) rmSync(claimFile(), { force: true });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The simulated cluster of the live embedded run, if there is one. */
export function liveEmbeddedState(): EmbeddedState | undefined {
  const claim = readClaim();
  if (claim === undefined || claim === 'unreadable' || !isAlive(claim.pid)) return undefined;
  const { kubeconfig, aws, clusterName } = claim;
  if (kubeconfig === undefined || aws === undefined || clusterName === undefined) return undefined;
  return { kubeconfig, aws, clusterName };
}

/**
 * The claims' directory, made private to this user. On a shared temporary directory another
 * user could have made it first, and a claim there could name any directory to delete: refused.
 */
function ownRoot(): string {
  const base = root();
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const uid = process.getuid?.();
  if (uid !== undefined && statSync(base).uid !== uid) {
    throw new UsageError(`${base} belongs to another user: give this run a TMPDIR of its own`);
  }
  return base;
}

/**
 * Written whole to a file of its own, then linked into place: a claim is never seen half
 * written, and the link fails if a claim is already there (false).
 */
function createClaim(claim: Claim): boolean {
  const staged = stage(claim);
  try {
    linkSync(staged, claimFile());
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    rmSync(staged, { force: true });
  }
}

/** Replaces this run's claim in one rename, so readers see the old or the new one whole. */
function replaceClaim(claim: Claim): void {
  renameSync(stage(claim), claimFile());
}

function stage(claim: Claim): string {
  const staged = join(root(), `.claim-${process.pid}-${Date.now()}`);
  writeFileSync(staged, JSON.stringify(claim), { mode: 0o600 });
  return staged;
}

function isUnder(base: string, dir: string): boolean {
  const path = relative(base, dir);
  return path !== '' && !path.startsWith('..') && !isAbsolute(path);
}

/** The claim on file: none, one that cannot be read (held by someone), or the claim. */
function readClaim(): Claim | 'unreadable' | undefined {
  let text: string;
  try {
    text = readFileSync(claimFile(), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return 'unreadable';
  }
  try {
    const value = JSON.parse(text) as Partial<Claim>;
    // A claim without a pid is an earlier release's, which no process can still hold.
    return typeof value.pid === 'number' && typeof value.dir === 'string'
      ? (value as Claim)
      : undefined;
  } catch {
    return 'unreadable';
  }
}

/** Signal 0 checks that the process exists; EPERM means it does, under another user. */
function isAlive(pid: number): boolean {
  // A claim naming this very process is an earlier run's, whose pid it was given again.
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
