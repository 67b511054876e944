// @ts-check
/**
 * Which folder may import which (`npm run lint` runs dependency-cruiser with this file after
 * ESLint). One entry per folder: its role, said once here and in functions/README.md (a test
 * keeps the two equal), and the folders or files it may import besides its own, every one of them
 * listed before it, so that no folder imports one further down (the same test checks the order).
 * Everything else is an error, as is any import circle, type-only imports included.
 *
 * The direction: handlers → wiring → {runtime, nlb, state, queue, kube}; runtime → sync → core;
 * adapters → the ports they implement, aws/ and contract/; infra → contract/, nlb/model/, the
 * forwarder build and package/ only. ESLint's purity rules (eslint.config.js) add what a pure
 * folder may not touch besides: Node built-ins, SDKs, the clock, the environment.
 */

/**
 * @typedef {{ role: string, imports: string[], subfolders?: string[] }} Folder
 * `imports`: folders (a prefix of paths) or single files (with their extension) it may import.
 * `subfolders`: nested folders with an entry of their own, not covered by this one.
 */

/** @type {Record<string, Folder>} */
export const folders = {
  'functions/core': {
    role: 'the controller’s rules as pure functions: keys, claims, filters, host sets, errors',
    imports: [],
  },
  'functions/sync': {
    role: 'the use cases (sync a Service, its hosts, the nodes) behind the ports in ports.ts; pure',
    imports: ['functions/core'],
  },
  'functions/nlb/model': {
    role: 'the pure NLB model: annotations, desired state, plan, names, tenant policy rules',
    imports: ['functions/core'],
  },
  'functions/contract': {
    role: 'what crosses a process boundary: work messages and their groups, lifecycle events, controller and tenant-policy configuration, queue limits',
    imports: ['functions/core', 'functions/nlb/model'],
  },
  'functions/package': {
    role: 'where the package is installed and whether a module runs as a script',
    imports: [],
  },
  'functions/aws': {
    role: 'SDK plumbing every adapter shares: client rate limits, the registration budget, AWS error classes, caller roles',
    imports: ['functions/core'],
  },
  'functions/nlb': {
    role: 'the NLB provider (sync’s LoadBalancerProvider port): observe, execute, ownership, subnets, security groups',
    imports: ['functions/core', 'functions/nlb/model', 'functions/sync/ports.ts', 'functions/aws'],
    subfolders: ['functions/nlb/model'],
  },
  'functions/runtime': {
    role: 'batch routing, key passes under leases, node sync, sweep, lifecycle feed, behind runtime/ports.ts',
    imports: ['functions/core', 'functions/sync', 'functions/contract', 'functions/aws'],
  },
  'functions/state': {
    role: 'the DynamoDB state table (sync’s StateStore and runtime’s RuntimeStore ports), record codec, budget item',
    imports: [
      'functions/core',
      'functions/contract',
      'functions/sync/ports.ts',
      'functions/runtime/ports.ts',
      'functions/aws',
    ],
  },
  'functions/queue': {
    role: 'the SQS work and node queues and the EventBridge publisher (runtime’s ports)',
    imports: [
      'functions/core',
      'functions/contract',
      'functions/runtime/ports.ts',
      'functions/aws',
    ],
  },
  'functions/kube': {
    role: 'the Kubernetes API client (sync’s KubernetesApi port), kubeconfig, EKS tokens, in-cluster connection',
    imports: ['functions/core', 'functions/contract', 'functions/sync/ports.ts', 'functions/aws'],
  },
  'functions/wiring': {
    role: 'the only place that names concrete adapters: builds the runtime from the configuration',
    imports: [
      'functions/core',
      'functions/sync',
      'functions/contract',
      'functions/aws',
      'functions/nlb',
      'functions/state',
      'functions/queue',
      'functions/kube',
      'functions/runtime',
    ],
  },
  'functions/service-sync': {
    role: 'Lambda handler: the work queue',
    imports: ['functions/wiring', 'functions/runtime'],
  },
  'functions/node-sync': {
    role: 'Lambda handler: the node queue',
    imports: ['functions/wiring', 'functions/runtime'],
  },
  'functions/sweep': {
    role: 'Lambda handler: the sweep schedule',
    imports: ['functions/wiring', 'functions/runtime'],
  },
  'functions/forwarder': {
    role: 'the in-cluster forwarder (its own process and bundle): watches, filters, sends keys',
    imports: [
      'functions/core',
      'functions/contract',
      'functions/kube',
      'functions/queue',
      'functions/aws',
      'functions/runtime/ports.ts',
      'functions/package',
    ],
  },
  'functions/local': {
    role: 'the CLI and local mode: simulated cluster (fake-kube/), moto, uninstall, k8s render',
    imports: ['functions'],
  },
  infra: {
    role: 'the CDK construct and app',
    imports: [
      'functions/contract',
      'functions/nlb/model',
      'functions/forwarder/build.ts',
      'functions/package',
    ],
  },
  scripts: {
    role: 'build-time tools: the package build, doc and schema generators, k8s:configure',
    imports: ['functions', 'infra'],
  },
  kit: {
    role: 'fixtures the tests and the benchmarks share: in-memory ports, moto accounts, call recording',
    imports: ['functions'],
  },
  bench: {
    role: 'the benchmarks and their simulators',
    imports: ['functions', 'infra', 'kit'],
  },
  test: {
    role: 'the tests',
    imports: [
      'functions',
      'infra',
      'scripts',
      'kit',
      'bench',
      'bin',
      'eslint.config.js',
      '.dependency-cruiser.mjs',
    ],
  },
};

const escape = (/** @type {string} */ text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** A folder matches itself and everything under it; a file only itself. */
const pattern = (/** @type {string} */ target) =>
  /\.[cm]?[jt]s$/.test(target) ? `^${escape(target)}$` : `^${escape(target)}/`;

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import circle: split the module that sits on it (see functions/README.md).',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  allowed: [
    {
      comment: 'packages and Node built-ins (ESLint fences the pure folders)',
      from: {},
      to: {
        dependencyTypesNot: ['local', 'localmodule', 'aliased-tsconfig', 'undetermined'],
      },
    },
    ...Object.entries(folders).map(([folder, { imports, subfolders = [] }]) => ({
      from: {
        path: pattern(folder),
        ...(subfolders.length > 0 ? { pathNot: subfolders.map(pattern) } : {}),
      },
      to: { path: [folder, ...imports].map(pattern) },
    })),
  ],
  allowedSeverity: 'error',
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|cdk\\.out|infra/k8s/code)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs', '.json'] },
  },
};
