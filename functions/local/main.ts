// `npm start`: the whole pipeline on one machine. Until the local mode lands (issue 8) this says
// what exists so far instead of pretending to run.
const built = [
  'test fixtures: moto server (AWS) and the fake Kubernetes API server (test/support/)',
  'controller core: pure logic and use cases (functions/core, functions/sync; docs/parity.md)',
  'AWS NLB provider (functions/aws; docs/aws-provider.md; npm run bench:calls)',
  'serverless runtime: service-sync, node-sync and sweep handlers, DynamoDB state (docs/runtime.md)',
  'in-cluster forwarder and its manifests (docs/forwarder.md)',
  'CDK infrastructure: npx cdk deploy (infra/; README "Install on AWS")',
];
const pending = ['local mode: embedded cluster + moto, driven by npm start'];

console.log('serverless-service-controller: local mode is not built yet.');
console.log('\nBuilt so far:');
for (const item of built) console.log(`  - ${item}`);
console.log('\nNot built yet:');
for (const item of pending) console.log(`  - ${item}`);
console.log('\nRun the tests with: npm test');
