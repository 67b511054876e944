import { App, Validations, type Environment } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ControllerStack } from './controller-stack';
import { settingsFromContext, stackNameFor } from './settings';
import { runAsScript } from '../functions/package/run-as-script';

/**
 * `npx cdk deploy -c clusterName=… -c vpcId=…`: every setting comes from CDK context (see
 * infra/settings.ts and the README). cdk-nag's AWS Solutions checks run on every synth.
 */
export function createApp(
  app = new App(),
  env: Environment = {
    account: process.env.CDK_DEFAULT_ACCOUNT,
    region: process.env.CDK_DEFAULT_REGION,
  },
): { app: App; stack: ControllerStack } {
  const settings = settingsFromContext((key) => app.node.tryGetContext(key));
  const stack = new ControllerStack(app, stackNameFor(settings.clusterName), {
    settings,
    env,
    description: `serverless-service-controller for cluster ${settings.clusterName}`,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack };
}

if (runAsScript(import.meta.url)) {
  createApp().app.synth();
}
