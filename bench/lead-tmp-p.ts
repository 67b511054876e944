import { simulateOurs } from './scenarios/propagation';
const t = Date.now();
const r = await simulateOurs(10000);
console.log({ ...r, completionsMs: undefined }, 'wall', Date.now() - t, 'rss MB', Math.round(process.memoryUsage().rss / 1e6));
