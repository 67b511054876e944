/** The report's section on 10,000 Services on 5,000 nodes (bench/scenarios/scale.ts). */
import { kb, ratio, s, table } from '../support/markdown';
import { round } from '../support/stats';
import { maxRecordedTargets, type ScaleResult } from './scale';

/** Issue 21 item 5: 10,000 Services on 5,000 nodes. */
export function scaleSection(r: ScaleResult): string {
  const m = r.model;
  const p = r.propagation;
  const limit = r.record.itemLimitBytes;
  return [
    `## ${m.services.toLocaleString('en')} LoadBalancer Services on ${m.nodes.toLocaleString('en')} nodes`,
    '',
    `What grows with the cluster (bench/scenarios/scale.ts). Node-change completion is the propagation simulation above at ${m.services.toLocaleString('en')} Services (on 3 nodes: the node count changes what a call carries, not how many there are). Item sizes come from the functions' own serialisation with DynamoDB's item-size rule; the sweep's scan is DynamoStateStore.listServiceItems paging a table of ${m.services.toLocaleString('en')} records, their lease items and the host set, served in 1 MB pages and billed as strongly consistent reads (1 unit per 4 KB read, whatever the filter keeps), ${m.latencyMs} ms per page.`,
    '',
    table(
      ['figure', 'measured', 'goal or limit', 'ratio'],
      [
        [
          'node change: last NLB has the node',
          s(p.maxMs),
          `floor ${s(r.floorMs)} (${m.services * m.portsPerService} RegisterTargets at 4/s)`,
          `${ratio(p.maxMs, r.floorMs)} of the floor`,
        ],
        [
          'throttled ELBv2 attempts',
          `${p.throttledAttempts} of ${p.elbv2Attempts}`,
          '≤ 5 %',
          `${round((100 * p.throttledAttempts) / Math.max(1, p.elbv2Attempts), 1)} %`,
        ],
        [
          `a Service's record item, ${m.portsPerService} ports`,
          kb(r.record.bytesUnrecordedTargets),
          `400 KB item limit; ${Math.ceil(r.record.bytesUnrecordedTargets / 1024)} write units a write`,
          `${round(r.record.bytesUnrecordedTargets / limit, 3)} of the limit`,
        ],
        [
          '… the same with every target recorded (before)',
          kb(r.record.bytesRecordedTargets),
          `${Math.ceil(r.record.bytesRecordedTargets / 1024)} write units a write`,
          `${round(r.record.bytesRecordedTargets / limit, 2)} of the limit`,
        ],
        [
          '… 4 ports, every target recorded (before)',
          kb(r.record.bytesRecordedTargetsFourPorts),
          'over the 400 KB limit: the record could not be written',
          `${round(r.record.bytesRecordedTargetsFourPorts / limit, 2)} of the limit`,
        ],
        [
          'host set',
          `${r.hostSet.chunks} chunks, ${kb(r.hostSet.bytes)}`,
          `${r.hostSet.readUnits} read units a full read`,
          '—',
        ],
        [
          "sweep's scan of the state table",
          `${r.sweep.pages} pages, ${kb(r.sweep.bytes)}, ${r.sweep.keys} keys`,
          `${r.sweep.readUnits} read units, ~${s(r.sweep.durationMs)} per pass`,
          '—',
        ],
      ],
    ),
    '',
    'Hot keys during the node change (DynamoDB serves up to 3,000 read units and 1,000 write units a second per partition, and a single item never spans partitions):',
    '',
    table(
      ['item', 'requests/s', 'units/s', 'partition limit', 'share'],
      r.hotKeys.map((h) => [
        h.key,
        round(h.perSecond, 1),
        round(h.unitsPerSecond, 1),
        h.limit,
        `${round((100 * h.unitsPerSecond) / h.limit, 1)} %`,
      ]),
    ),
    '',
    `What broke first, and what changed: (1) the record item. Every target group's target list was recorded, ~110 KB per group at ${m.nodes.toLocaleString('en')} nodes, so each record write cost over 200 write units and a Service with 4 ports could not be written at all. Lists longer than ${maxRecordedTargets} targets are no longer recorded; a host update reads such a group with one DescribeTargetHealth (the Describe bucket, 10/s, not the registration one). (2) Every host update read the whole host set (${r.hostSet.readUnits} read units): now the chunks, which are named by their content, are read once per function instance and the small meta item tells whether they changed. (3) Target diffs compared lists (millions of comparisons per group at ${m.nodes.toLocaleString('en')} nodes): now sets. Not measured here: the sweep's tagging scan (GetResources pages of 100 over ~${(m.services * 4).toLocaleString('en')} resources) and the forwarder (its own section).`,
  ].join('\n');
}
