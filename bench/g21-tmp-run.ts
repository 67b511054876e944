import { simulateOurs, simulateSwap } from './scenarios/propagation';
const n = Number(process.argv[2] ?? 1000);
const mode = process.argv[3] ?? 'budget';
const which = process.argv[4] ?? 'add';
if (which === 'swap') {
  console.log(JSON.stringify(await simulateSwap(n, mode === 'none' ? null : undefined), null, 1));
} else {
  const r = await simulateOurs(n, 20, mode === 'none' ? null : undefined);
  const { completionsMs, ...rest } = r;
  console.log(JSON.stringify(rest, null, 1));
}
