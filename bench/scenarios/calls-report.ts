/** The report's section on AWS calls per scenario (bench/scenarios/calls.ts), and its chart. */
import { ratio, table } from '../support/markdown';
import { barChart } from '../support/svg';
import { anchors, type ScenarioCalls } from './calls';

export function callsSection(calls: ScenarioCalls[]): string {
  const rows = calls.map((r) => {
    const a = anchors[r.scenario];
    return [
      a.label,
      r.cloud,
      a.goal,
      r.cloud <= a.goal ? 'yes' : '**no**',
      a.cpa ?? 'n/a',
      a.cpa === undefined ? '—' : ratio(r.cloud, a.cpa),
      a.albcText,
      ratio(r.cloud, a.albc),
      r.tagging,
      r.state,
      r.kube,
      Object.entries(r.byOperation)
        .map(([op, n]) => `${op.split('.')[1] ?? op}×${n}`)
        .join(' ') || '—',
    ];
  });
  return [
    '## AWS calls per scenario',
    '',
    'One Service with 2 ports and 3 nodes (the pod scenarios: 50 pods instead, `nlb-target-type: ip`; cloud-provider-aws has no pod targets), through the real use cases (syncService, syncNodes, syncHosts) and the real NLB provider against moto; counted with SDK middleware. The anchors are the counts in docs/design.md §5 (cloud-provider-aws legacy NLB, counted from its code; aws-load-balancer-controller, approximate; its ratio uses the middle of its range). "State ops" are state-store port calls and "Kubernetes" the Kubernetes API and Events calls of the use cases (in-memory here, so they are counted, not timed).',
    '',
    table(
      [
        'scenario',
        'ours: ELBv2+EC2',
        'goal',
        'within goal',
        'cloud-provider-aws',
        'ours / CPA',
        'AWS LB Controller',
        'ours / ALBC',
        'tagging API',
        'state ops',
        'Kubernetes',
        'ours, by operation',
      ],
      rows,
    ),
    '',
    '![AWS calls per scenario](calls.svg)',
  ].join('\n');
}

/** calls.svg: our calls per scenario against the anchors. */
export function callsChart(calls: ScenarioCalls[]): Record<string, string> {
  return {
    'calls.svg': barChart({
      title: 'ELBv2 + EC2 calls per Service (2 ports, 3 nodes)',
      categories: calls.map((r) => anchors[r.scenario].label),
      series: [
        { name: 'ours (measured, moto)', values: calls.map((r) => r.cloud) },
        {
          name: 'cloud-provider-aws (design.md §5)',
          values: calls.map((r) => anchors[r.scenario].cpa ?? 0),
        },
        {
          name: 'AWS LB Controller (design.md §5, approx.)',
          values: calls.map((r) => anchors[r.scenario].albc),
        },
      ],
      yLabel: 'calls',
    }),
  };
}
