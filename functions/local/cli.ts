/**
 * The command line: `npm start`, `npx serverless-service-controller …` (bin/), and dist/cli.js in
 * the published package. `--help` and `k8s render` need only the package's dependencies; the other
 * commands drive a Kubernetes cluster and load `@kubernetes/client-node` (and, for the embedded
 * cluster, `rfc6902`), which are optional peer dependencies, so that a construct user does not
 * install them. Those commands are imported only when asked for.
 */
import { UsageError, usage } from './cli-usage';
import type * as Commands from './commands';
import { runAsScript } from '../package/run-as-script';

/** The optional packages the cluster commands need, as `npm install` takes them. */
const clusterPackages = ['@kubernetes/client-node@^2.0.1', 'rfc6902@^5.4.0'];

class MissingPackageError extends Error {}

async function clusterCommands(): Promise<typeof Commands> {
  try {
    return await import('./commands');
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    if (code === 'ERR_MODULE_NOT_FOUND' && /@kubernetes\/client-node|rfc6902/.test(message ?? '')) {
      throw new MissingPackageError(
        `this command drives a Kubernetes cluster and needs the optional packages ${clusterPackages.join(' and ')}:\n  npm install ${clusterPackages.join(' ')}`,
      );
    }
    throw error;
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  if (argv[0] === 'k8s') {
    const { runK8sCommand } = await import('./k8s-render');
    return runK8sCommand(argv.slice(1));
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage);
    return 0;
  }
  return (await clusterCommands()).main(argv);
}

if (runAsScript(import.meta.url)) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (error) {
    const { name, code, message } = error as { name?: string; code?: string; message?: string };
    if (
      error instanceof UsageError ||
      (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS'))
    ) {
      console.error(`${message ?? ''}\n\n${usage}`);
    } else if (error instanceof MissingPackageError || name === 'MotoMissingError') {
      console.error(message);
    } else {
      console.error(withCauses(error));
    }
    process.exitCode = 2;
  }
  // Lingering sockets (keep-alive agents, watches) must not hold a finished command open.
  setTimeout(() => process.exit(), 100).unref();
}

/**
 * An error's message and its causes': a failed request says only "fetch failed", and the reason
 * (a refused or reset connection, a timeout) is in its cause.
 */
function withCauses(error: unknown): string {
  const parts: string[] = [];
  for (let current = error, depth = 0; current !== undefined && depth < 4; depth++) {
    if (!(current instanceof Error)) {
      parts.push(typeof current === 'string' ? current : JSON.stringify(current));
      break;
    }
    const code = (current as { code?: unknown }).code;
    parts.push(typeof code === 'string' ? `${current.message} (${code})` : current.message);
    current = current.cause;
  }
  return parts.join(': ');
}
