/**
 * `npm run bench:forwarder`: streams 10,000 Services and 5,000 Nodes (BENCH_SERVICES, BENCH_NODES)
 * through the fake API server into the bundled forwarder and into a client-node informer baseline,
 * and prints the peak RSS and CPU time of each (bench/scenarios/forwarder.ts).
 */
import { startMotoServer } from '../functions/local/moto-server';
import { forwarderBench } from './scenarios/forwarder';

const services = Number(process.env.BENCH_SERVICES ?? 10_000);
const nodes = Number(process.env.BENCH_NODES ?? 5_000);

const moto = await startMotoServer();
try {
  const result = await forwarderBench(moto.endpoint, { services, nodes });
  console.log(`${services} Services (${result.loadBalancerServices} LoadBalancer), ${nodes} Nodes`);
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
} finally {
  await moto.stop();
}
