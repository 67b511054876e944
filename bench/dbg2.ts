import { simulateLifecycle } from './scenarios/cost-sim';
const t = performance.now();
const bills = await simulateLifecycle(Number(process.env.N ?? 50), 'today');
for (const b of bills) console.log(b.phase, 'p50', b.p50Ms, 'max', b.maxMs, 'inv', b.invocations, 'wait', (b.waitingShare*100).toFixed(1)+'%', 'att', b.elbv2Ec2Attempts, 'thr', b.throttled, '$/M', b.perMillion.toFixed(2));
console.log('wall', Math.round(performance.now() - t));
