/**
 * `npm run bench:forwarder`: streams 10,000 Services and 5,000 Nodes (BENCH_SERVICES, BENCH_NODES),
 * and 1,000 ip-mode Services with one EndpointSlice of 20 endpoints each (BENCH_IP_SERVICES,
 * BENCH_ENDPOINTS), through the fake API server into the bundled forwarder and into a client-node
 * informer baseline, and prints the peak RSS and CPU time of each (bench/scenarios/forwarder.ts). Then the oversized
 * case (bench/scenarios/forwarder-oversized.ts): BENCH_OVERSIZED Services (default 30) with 85,000
 * source ranges each in one namespace at the initial list and 5 more through the watch, beside an
 * ordinary Service in another namespace, against the Deployment's memory limit.
 * BENCH_CASE=realistic or BENCH_CASE=oversized runs only that case.
 */
import { startMotoServer } from '../functions/local/moto-server';
import { forwarderBench } from './scenarios/forwarder';
import { oversizedForwarderRun } from './scenarios/forwarder-oversized';

const services = Number(process.env.BENCH_SERVICES ?? 10_000);
const nodes = Number(process.env.BENCH_NODES ?? 5_000);
const ipServices = Number(process.env.BENCH_IP_SERVICES ?? 1_000);
const endpoints = Number(process.env.BENCH_ENDPOINTS ?? 20);
const oversized = Number(process.env.BENCH_OVERSIZED ?? 30);
const only = process.env.BENCH_CASE;

const moto = await startMotoServer();
try {
  if (only !== 'oversized') {
    const result = await forwarderBench(moto.endpoint, {
      services,
      nodes,
      ipServices,
      endpoints,
    });
    console.log(
      `${services} Services (${result.loadBalancerServices} LoadBalancer), ${nodes} Nodes, ${ipServices} ip-mode Services with one EndpointSlice of ${endpoints} endpoints each (listed, then each changed once)`,
    );
    console.table(
      [result.forwarder, result.baseline].map((r) => ({
        process: r.name,
        'peak RSS (MiB)': r.peakRssMiB,
        'CPU (s)': r.cpuSeconds,
        'wall (s)': r.seconds,
      })),
    );
    console.log(
      JSON.stringify({
        forwarderPeakRssMiB: result.forwarder.peakRssMiB,
        baselinePeakRssMiB: result.baseline.peakRssMiB,
        targetMiB: result.targetMiB,
        within: result.within,
      }),
    );
    if (!result.within) process.exitCode = 1;
  }
  if (only !== 'realistic') {
    const result = await oversizedForwarderRun(moto.endpoint, {
      listed: oversized,
      watched: 5,
      ranges: 85_000,
    });
    const delivered = result.expected.filter((key) => result.delivered.includes(key)).length;
    console.log(
      `Oversized Services: ${oversized} listed + 5 watched, ${result.options.ranges} source ranges (${(result.serviceBytes / 2 ** 20).toFixed(1)} MiB of JSON) each, beside 2 ordinary Services in another namespace`,
    );
    console.table([
      {
        process: 'forwarder (oversized Services)',
        'peak RSS (MiB)': result.peakRssMiB,
        'limit (MiB)': result.limitMiB,
        'CPU (s)': result.cpuSeconds,
        'wall (s)': result.seconds,
        'keys delivered': `${delivered}/${result.expected.length}`,
        crashed: result.crashed === undefined ? 'no' : 'yes',
      },
    ]);
    if (result.crashed !== undefined) console.log(result.crashed);
    const within =
      result.crashed === undefined &&
      result.peakRssMiB < result.limitMiB &&
      delivered === result.expected.length;
    console.log(
      JSON.stringify({ oversizedPeakRssMiB: result.peakRssMiB, limitMiB: result.limitMiB, within }),
    );
    if (!within) process.exitCode = 1;
  }
} finally {
  await moto.stop();
}
