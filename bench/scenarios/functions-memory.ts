/**
 * Huge Services in one namespace against the functions (issue 32, finding 7): a tenant fills
 * many ClusterIP Services with ~1 MB of annotation each, and the tenant policy's count lists the
 * namespace's Services. Each list runs in a child process (bench/scenarios/functions-memory-child.ts)
 * against the fake API server in this one; measured: the child's peak RSS (VmHWM, also sampled
 * from /proc so a run that dies still reports how high it got) against the functions' 512 MB.
 * Used by `npm run bench:functions-memory`.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeKubeApiServer } from '../../functions/local/fake-kube';
import { track } from '../support/children';

/** The functions' memory size (infra/service-controller.ts). */
export const functionMemoryMiB = 512;

export type ListMode = 'summaries' | 'whole-pages';

export interface FunctionsMemoryOptions {
  /** ClusterIP Services in the tenant namespace. */
  readonly services: number;
  /** Bytes of annotation in each. */
  readonly bytesEach: number;
  readonly modes: readonly ListMode[];
  /** A V8 heap cap for the child (`--max-old-space-size`), to show what the list must hold. */
  readonly heapMiB?: number | undefined;
}

export interface FunctionsMemoryRun {
  readonly mode: ListMode;
  readonly peakRssMiB: number;
  readonly baselineRssMiB: number | undefined;
  /** The V8 heap in use at its highest, sampled every 10 ms while the list runs. */
  readonly heapUsedMiB: number | undefined;
  /** Bytes of JSON of what the list returned (what its caller keeps). */
  readonly keptBytes: number | undefined;
  readonly services: number | undefined;
  readonly seconds: number | undefined;
  /** Why the child stopped without a result, if it did. */
  readonly crashed: string | undefined;
}

function hwmKb(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  } catch {
    return undefined;
  }
}

export async function functionsMemoryBench(
  options: FunctionsMemoryOptions,
): Promise<FunctionsMemoryRun[]> {
  const kube = await FakeKubeApiServer.start();
  try {
    const filler = 'x'.repeat(options.bytesEach);
    for (let i = 0; i < options.services; i++) {
      kube.store.create('services', 'tenant', {
        metadata: {
          name: `huge-${i}`,
          namespace: 'tenant',
          annotations: { 'example.com/filler': filler },
        },
        spec: { type: 'ClusterIP', ports: [{ name: 'http', protocol: 'TCP', port: 80 }] },
      });
    }
    const runs: FunctionsMemoryRun[] = [];
    for (const mode of options.modes) runs.push(await runChild(kube, mode, options.heapMiB));
    return runs;
  } finally {
    await kube.stop();
  }
}

async function runChild(
  kube: FakeKubeApiServer,
  mode: ListMode,
  heapMiB: number | undefined,
): Promise<FunctionsMemoryRun> {
  const child = track(
    spawn(
      process.execPath,
      [
        ...(heapMiB === undefined ? [] : [`--max-old-space-size=${heapMiB}`]),
        '--import',
        'tsx',
        join('bench', 'scenarios', 'functions-memory-child.ts'),
        mode,
        'tenant',
      ],
      {
        env: { PATH: process.env.PATH ?? '', KUBECONFIG_TEXT: kube.kubeconfigText() },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  let sampledKb = 0;
  const sampler = setInterval(() => {
    sampledKb = Math.max(sampledKb, hwmKb(child.pid ?? 0) ?? 0);
  }, 20);
  const code = await new Promise<number | string>((resolve) =>
    child.once('exit', (exit, signal) => resolve(exit ?? signal ?? '?')),
  );
  clearInterval(sampler);
  const line = output
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  const result = line === undefined ? undefined : (JSON.parse(line) as Record<string, number>);
  const sampledMiB = Math.round((sampledKb / 1024) * 10) / 10;
  return {
    mode,
    peakRssMiB: Math.max(result?.peakRssMiB ?? 0, sampledMiB),
    baselineRssMiB: result?.baselineRssMiB,
    heapUsedMiB: result?.sampledPeakHeapUsedMiB,
    keptBytes: result?.keptBytes,
    services: result?.services,
    seconds: result?.seconds,
    crashed: code === 0 && result !== undefined ? undefined : `exit ${code}: ${output.slice(-800)}`,
  };
}
