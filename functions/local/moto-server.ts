import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export const motoInstallHint =
  "moto's server is required for the integration tests and npm start's embedded default, but python3 cannot import it. " +
  "Install it with:  python3 -m pip install 'moto[server]==5.2.1'  (see README, Prerequisites).";

export interface MotoServer {
  readonly endpoint: string;
  stop(): Promise<void>;
}

export class MotoMissingError extends Error {
  override readonly name = 'MotoMissingError';
  constructor(detail: string) {
    super(`${motoInstallHint}\n${detail}`.trim());
  }
}

/**
 * Starts `python3 -m moto.server` on a free loopback port and waits until it answers.
 * `python` is the interpreter command with any leading arguments (PYTHON overrides the default).
 */
export async function startMotoServer(
  python: readonly string[] = [process.env.PYTHON ?? 'python3'],
): Promise<MotoServer> {
  const [command = 'python3', ...args] = python;
  const probe = spawnSync(command, [...args, '-c', 'import moto.server, flask'], {
    encoding: 'utf8',
  });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new MotoMissingError(
      probe.error?.message ?? probe.stderr.trim().split('\n').at(-1) ?? '',
    );
  }
  const port = await freePort();
  const child = spawn(
    command,
    [...args, '-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, MOTO_ALLOW_NONEXISTENT_REGION: 'false' },
    },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(endpoint, child, () => stderr);
  return {
    endpoint,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
    },
  };
}

async function waitUntilReady(
  endpoint: string,
  child: ChildProcess,
  stderr: () => string,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`moto server exited with ${child.exitCode}:\n${stderr()}`);
    }
    try {
      const response = await fetch(`${endpoint}/moto-api/data.json`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`moto server did not answer on ${endpoint} within 30 s:\n${stderr()}`);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
