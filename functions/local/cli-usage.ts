/**
 * The CLI's usage and its usage error, apart from the commands so that `--help` and `k8s render`
 * load neither the Kubernetes client nor the local cluster (optional dependencies, see cli.ts).
 */
export const defaultQueueName = 'serverless-service-controller-work';
export const defaultTableName = 'serverless-service-controller-state';

export const usage = `serverless-service-controller: the whole controller on one machine

Usage:
  npm start [-- OPTIONS]                 run (the default command)
  serverless-service-controller run [OPTIONS]
  serverless-service-controller apply -f FILE        apply Service manifests (YAML or JSON)
  serverless-service-controller delete NAMESPACE/NAME
  serverless-service-controller node add [COUNT] | remove NAME | exclude NAME | include NAME
  serverless-service-controller pod add NAMESPACE/SERVICE [COUNT] | remove NAMESPACE/SERVICE POD|IP
                                     | list NAMESPACE/SERVICE
                                                     simulated pods behind a Service (its
                                                     EndpointSlice), for nlb-target-type: ip
  serverless-service-controller uninstall [--yes]    delete what the controller owns, release finalizers
  serverless-service-controller k8s render --stack-outputs FILE --out DIR [OPTIONS]
                                                     the forwarder's kustomization for one cluster
                                                     (k8s render --help lists its options)
  serverless-service-controller --help

run, with no cluster given, starts the embedded default: a local AWS emulator (moto), a simulated
cluster (three Ready nodes) and a sample LoadBalancer Service, and shows each Service's phase, NLB
and targets as they change. Change the simulated cluster with the commands above (they use its
kubeconfig, printed at start) or with kubectl. Ctrl-C stops everything.

Options (each also from the environment variable shown, but --kubeconfig):
  --kubeconfig PATH            manage this cluster (real mode) instead of the embedded one; only
                               this flag selects a real cluster: KUBECONFIG in the environment is
                               never used
  --embedded                   the embedded default (what runs without --kubeconfig anyway)
  --allow-insecure-connection  SSC_ALLOW_INSECURE_CONNECTION=true  real mode: accept a kubeconfig
                               whose server (other than on this machine) is plain HTTP or sets
                               insecure-skip-tls-verify, with a warning; refused otherwise
  --rbac                       SSC_RBAC=true  embedded: the simulated cluster enforces the RBAC of
                               infra/k8s; the functions and the forwarder run as their own
                               identities there, each refused request is printed (and fails
                               --until-converged); the commands above and kubectl stay admin
  --cluster-name NAME          SSC_CLUSTER_NAME        real mode: names and tags what it owns
  --region REGION              AWS_REGION              then AWS_DEFAULT_REGION, default us-east-1
  --vpc-id ID                  SSC_VPC_ID              real mode: the cluster VPC
  --backend-security-group-id ID  SSC_BACKEND_SECURITY_GROUP_ID
  --queue-name NAME            SSC_QUEUE_NAME          default ${defaultQueueName}
  --table-name NAME            SSC_TABLE_NAME          default ${defaultTableName}
  --load-balancer-class CLASS  SSC_LOAD_BALANCER_CLASS default serverless-service-controller.io/nlb
  --claim-classless            SSC_CLAIM_CLASSLESS=true  also serve Services without a class
  --node-policy stable|seed    SSC_NODE_POLICY
  --tenant-policy FILE         SSC_TENANT_POLICY       a JSON file: what each namespace may ask for
                               (docs/tenant-safety.md#tenant-policy)
  --create-resources           SSC_CREATE_RESOURCES=true create the queue and table when missing
  --lease-seconds N            SSC_LEASE_SECONDS       how long a sync may hold a Service's key, and
                               so how long a key waits when its holder died (10-900, default 120)
  --until-converged            exit 0 once every LoadBalancer Service has its NLB, targets and
                               status; non-zero with the reason after --timeout
  --timeout SECONDS            SSC_TIMEOUT             default 300
  --yes                        uninstall: delete (without it, only list)
AWS credentials and endpoints come from the SDK's usual sources; AWS_ENDPOINT_URL points every
AWS client at an emulator.
`;

export class UsageError extends Error {}
