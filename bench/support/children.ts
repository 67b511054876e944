import type { ChildProcess } from 'node:child_process';

/** Child processes a benchmark started, so an interrupted run can stop them (bench/run.ts). */
const children = new Set<ChildProcess>();

export function track<C extends ChildProcess>(child: C): C {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

export function killTracked(): void {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
}
