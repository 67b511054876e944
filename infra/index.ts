/**
 * The package's CDK entry point: `import { ServiceController } from 'serverless-service-controller'`
 * in a stack of your own. The standalone app is infra/app.ts.
 */
export { ServiceController, type ServiceControllerProps } from './service-controller';
export type { ControllerCluster, ServiceControllerSettings } from './service-controller-settings';
export type { ControllerSettings } from './settings-schema';
export { ControllerStack, type ControllerStackProps } from './controller-stack';
