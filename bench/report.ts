/**
 * Turns the results of `npm run bench` into bench/results/latest.json, latest.md (tables, model,
 * assumptions) and SVG charts, formatted as the repository's Prettier configuration wants them.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import type { ScenarioCalls } from './scenarios/calls';
import { callsChart, callsSection } from './scenarios/calls-report';
import type { CostResult } from './scenarios/cost';
import { costChart, costSection } from './scenarios/cost-report';
import type { ForwarderResult } from './scenarios/forwarder';
import { forwarderChart, forwarderSection } from './scenarios/forwarder-report';
import type { BundlesResult } from './scenarios/bundles';
import { bundlesSection } from './scenarios/bundles-report';
import type { OursRun, PropagationResult, SeedRun } from './scenarios/propagation';
import type { CostSimResult } from './scenarios/cost-sim';
import { costSimSection } from './scenarios/cost-sim-report';
import { propagationCharts, propagationSection } from './scenarios/propagation-report';
import type { ScaleResult } from './scenarios/scale';
import { scaleSection } from './scenarios/scale-report';
import type { ThroughputResult } from './scenarios/throughput';
import { throughputChart, throughputSection } from './scenarios/throughput-report';
import { percentile, round } from './support/stats';

export interface BenchResults {
  readonly generatedAt: string;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memoryGiB: number;
    readonly loadAverage: readonly number[];
    readonly node: string;
  };
  readonly totalSeconds: number;
  readonly sectionSeconds: Record<string, number>;
  readonly errors: { readonly section: string; readonly message: string }[];
  readonly calls?: ScenarioCalls[] | undefined;
  readonly propagation?: PropagationResult | undefined;
  readonly throughput?: ThroughputResult | undefined;
  readonly throughputInMemory?: ThroughputResult | undefined;
  /** The create phase alone with the shared registration budget off. */
  readonly throughputWithoutBudget?: ThroughputResult | undefined;
  readonly forwarder?: ForwarderResult | undefined;
  readonly bundles?: BundlesResult | undefined;
  readonly cost?: CostResult | undefined;
  /** Cost and bursts on the virtual clock (issue 37). */
  readonly costSim?: CostSimResult | undefined;
  readonly scale?: ScaleResult | undefined;
}

function assumptions(results: BenchResults): string {
  const p = results.propagation;
  return [
    '## Assumptions and limits',
    '',
    `- Machine: ${results.machine.cpus} × ${results.machine.cpuModel}, ${results.machine.memoryGiB} GiB, Node ${results.machine.node}; load average at the start ${results.machine.loadAverage.map((l) => round(l, 2)).join(' / ')}. Wall-clock numbers (throughput, forwarder, cold init) move with the machine's load; call counts and the simulated propagation do not.`,
    `- Propagation: a fixed ${p?.model.latencyMs ?? 50} ms for every remote call, no jitter; warm Lambda instances (no cold start); ELBv2 registration bucket ${p?.rateLimits.elbv2Registration.capacity ?? 20} tokens at ${p?.rateLimits.elbv2Registration.refillPerSecond ?? 4}/s shared by RegisterTargets and DeregisterTargets and by nobody else in the account; throttled requests consume no token; the seed's client never sees a throttle (it waits for a token), and its informer already has the node; the seed's 16 calls are those docs/design.md §5 counts for one added node with a warm instance cache; jitter of the SDK backoff comes from a seeded PRNG, so runs repeat exactly.`,
    "- Throughput: each phase is one burst of events written at once; moto and the fake API server stand in for AWS and Kubernetes (a second run serves the provider port from memory, so only SQS and DynamoDB stay on moto); the event source mapping is emulated (long polling with 1 s waits, no batching window, no scaling ramp); all function instances share this machine's 2 cores with moto.",
    '- Cost: measured counts of one burst per phase; DynamoDB units estimated from item sizes; Lambda duration as measured on moto (plus a scaled variant); see the list of exclusions.',
    '- Bundles: built locally as CDK would, not taken from a synthesised cloud assembly; cold init measured on this machine, not in Lambda.',
  ].join('\n');
}

function cdf(values: readonly number[]): number[] {
  return Array.from({ length: 21 }, (_, i) => round(percentile(values, i * 5), 0));
}

/** What goes into latest.json: the full results, with per-Service timings reduced to percentiles. */
function forJson(results: BenchResults): unknown {
  const p = results.propagation;
  const run = ({ completionsMs, ...rest }: OursRun) => ({
    ...rest,
    completionPercentilesMs: cdf(completionsMs),
  });
  const seed = ({ loopMs, ...rest }: SeedRun) => ({
    ...rest,
    loopPercentilesMs: cdf(loopMs),
  });
  return {
    ...results,
    propagation:
      p === undefined
        ? undefined
        : {
            ...p,
            ours: p.ours.map(run),
            oursSharedQueue: p.oursSharedQueue?.map(run),
            oursLowBudget: p.oursLowBudget.map(run),
            seed: p.seed.map(seed),
          },
  };
}

/** The SVG charts, by file name; each section's beside its renderer. */
function charts(results: BenchResults): Record<string, string> {
  return {
    ...(results.calls ? callsChart(results.calls) : {}),
    ...(results.propagation ? propagationCharts(results.propagation) : {}),
    ...(results.throughput ? throughputChart(results.throughput) : {}),
    ...(results.forwarder ? forwarderChart(results.forwarder) : {}),
    ...(results.cost ? costChart(results.cost) : {}),
  };
}

export function renderMarkdown(results: BenchResults): string {
  const designBudgets = '[docs/design.md §5](../../docs/design.md#5-performance-budgets)';
  const sections = [
    '# Benchmarks',
    '',
    `Generated by \`npm run bench\` on ${results.generatedAt} in ${round(results.totalSeconds, 0)} s (${Object.entries(
      results.sectionSeconds,
    )
      .map(([name, seconds]) => `${name} ${round(seconds, 0)} s`)
      .join(', ')}). Data: [latest.json](latest.json). Design budgets: ${designBudgets}.`,
  ];
  if (results.errors.length > 0) {
    sections.push(
      '',
      '**Sections that failed:**',
      '',
      ...results.errors.map((e) => `- ${e.section}: ${e.message.split('\n')[0] ?? ''}`),
    );
  }
  if (results.calls) sections.push('', callsSection(results.calls));
  if (results.propagation) sections.push('', propagationSection(results.propagation));
  if (results.throughput) {
    sections.push('', throughputSection(results.throughput, results.throughputInMemory));
  }
  if (results.forwarder) sections.push('', forwarderSection(results.forwarder));
  if (results.bundles) sections.push('', bundlesSection(results.bundles));
  if (results.costSim) sections.push('', costSimSection(results.costSim));
  if (results.cost) sections.push('', costSection(results.cost, results.throughput));
  if (results.scale) sections.push('', scaleSection(results.scale));
  sections.push('', assumptions(results), '');
  return sections.join('\n');
}

/** Writes latest.json, latest.md and the charts; returns the formatted markdown. */
export async function writeReport(results: BenchResults, dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const format = async (text: string, file: string) => {
    const options = (await prettier.resolveConfig(file)) ?? {};
    return prettier.format(text, { ...options, filepath: file });
  };
  const markdown = await format(renderMarkdown(results), join(dir, 'latest.md'));
  writeFileSync(join(dir, 'latest.md'), markdown);
  writeFileSync(
    join(dir, 'latest.json'),
    await format(JSON.stringify(forJson(results)), join(dir, 'latest.json')),
  );
  for (const [name, svg] of Object.entries(charts(results))) writeFileSync(join(dir, name), svg);
  return markdown;
}
