/**
 * The report's section on the forwarder's memory and CPU (bench/scenarios/forwarder.ts), and its
 * chart.
 */
import { table } from '../support/markdown';
import { barChart } from '../support/svg';
import type { ForwarderResult } from './forwarder';

export function forwarderSection(f: ForwarderResult): string {
  return [
    '## Forwarder memory and CPU',
    '',
    `${f.services.toLocaleString('en-US')} Services (${f.loadBalancerServices.toLocaleString('en-US')} of type LoadBalancer), ${f.nodes.toLocaleString('en-US')} Nodes and ${f.ipServices.toLocaleString('en-US')} ip-mode LoadBalancer Services with one EndpointSlice of ${f.endpoints} endpoints each, realistic objects, streamed from the fake API server (the benchmark of \`npm run bench:forwarder\`, ${f.services === 10_000 && f.nodes === 5_000 ? 'at its full size' : 'at a reduced size set by BENCH_SERVICES / BENCH_NODES'}). The forwarder is the production bundle with the container's Node flags, sending to moto's SQS; it is measured once every LoadBalancer Service has been forwarded and every slice, changed once through the watch, has become a targets message. The baseline keeps full objects in client-node informer caches. Peak RSS is VmHWM, CPU is user+system time, from /proc.`,
    '',
    table(
      ['process', 'peak RSS (MiB)', 'CPU (s)', 'wall (s)'],
      [f.forwarder, f.baseline].map((p) => [p.name, p.peakRssMiB, p.cpuSeconds, p.seconds]),
    ),
    '',
    `Target (docs/design.md §5): ≤ ${f.targetMiB} MiB — ${f.within ? 'met' : '**not met**'}.`,
    '',
    '![Forwarder RSS](forwarder.svg)',
  ].join('\n');
}

/** forwarder.svg: peak RSS of the forwarder and of the informer baseline, against the target. */
export function forwarderChart(f: ForwarderResult): Record<string, string> {
  return {
    'forwarder.svg': barChart({
      title: `Peak RSS, ${f.services.toLocaleString('en-US')} Services + ${f.nodes.toLocaleString('en-US')} Nodes`,
      categories: ['peak RSS (MiB)'],
      series: [
        { name: 'forwarder', values: [f.forwarder.peakRssMiB] },
        { name: 'client-node informers', values: [f.baseline.peakRssMiB] },
      ],
      yLabel: 'MiB',
      reference: { value: f.targetMiB, label: `target ${f.targetMiB} MiB` },
    }),
  };
}
