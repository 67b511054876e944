/** A forwarder configuration as the stack's ForwarderConfig output carries it. */
export const sampleForwarderConfig = {
  clusterName: 'demo',
  region: 'eu-west-1',
  loadBalancerClass: 'serverless-service-controller.io/nlb',
  claimClassless: false,
  nodePolicy: 'stable',
  queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/work',
  nodeQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/node',
};
