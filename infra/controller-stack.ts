import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ServiceController } from './service-controller';
import type { ControllerSettings } from './settings-schema';

export { controllerGroup, forwarderNamespace, forwarderServiceAccount } from './service-controller';

export interface ControllerStackProps extends StackProps {
  readonly settings: ControllerSettings;
}

/**
 * The standalone app's stack (infra/app.ts): one ServiceController for one cluster, from CDK
 * context settings.
 */
export class ControllerStack extends Stack {
  readonly controller: ServiceController;

  constructor(scope: Construct, id: string, props: ControllerStackProps) {
    super(scope, id, props);
    // CDK leaves a construct with the id `Default` out of its children's logical IDs, so every
    // resource keeps the logical ID it had when the stack held them directly (release 0.1): an
    // upgrade updates the state table, queues and security groups in place and never replaces
    // them (test/infra/upgrade-logical-ids.test.ts pins them).
    this.controller = new ServiceController(this, 'Default', {
      ...props.settings,
      // The name release 0.1 gave it (docs/operations.md).
      dashboardName: `${id}-controller`,
    });
  }
}
