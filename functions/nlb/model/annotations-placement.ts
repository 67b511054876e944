import { isValidElbName } from './naming';
import { type AnnotationDefinition } from './annotation-types';
import { awsName, list } from './annotation-values';

/** The annotations of where the NLB is and what it is called: scheme, name, subnets, in the order docs/annotations.md lists them. */
export const placementAnnotations: readonly AnnotationDefinition[] = [
  {
    name: awsName('scheme'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'not supported: cloud-provider-aws reads only the legacy `internal` annotation (default internet-facing)',
    },
    values: '`internal` | `internet-facing`',
    default: 'the deployment default (`internal` unless configured)',
    mutability: 'replaces the load balancer',
    description: 'Whether the NLB gets public or private addresses.',
    apply: (value, o) => {
      if (value !== 'internal' && value !== 'internet-facing') {
        return 'must be "internal" or "internet-facing"';
      }
      o.scheme = value;
      return undefined;
    },
  },
  {
    name: awsName('name'),
    compared: {
      albc: "differs: the name is checked against all of AWS's rules before anything is made, and a name another load balancer holds is refused instead of taken over (its issue 2533); a later change is ignored in both",
      cloudProviderAws: 'not supported: cloud-provider-aws names the NLB from the Service UID',
    },
    values:
      'at most 32 letters, digits and hyphens; no hyphen first or last; not starting with `internal-`',
    default: 'derived: `k8s-<namespace>-<name>-<hash>`',
    mutability: 'at creation only',
    description:
      'Name of the NLB when it is created. A change later is ignored: the NLB keeps its name and DNS name. Ownership is still by tags: a name another load balancer already has stops the sync with a Warning naming its holder, and that load balancer is never changed or deleted. Tenant policy: `loadBalancerNames`.',
    apply: (value, o) => {
      if (!isValidElbName(value)) {
        return 'must be 1 to 32 letters, digits and hyphens, neither starting nor ending with a hyphen, and not starting with "internal-"';
      }
      o.loadBalancerName = value;
      return undefined;
    },
  },
  {
    name: awsName('internal'),
    compared: {
      albc: 'differs: a value other than `true` or `false` is an error there; here anything but `false` means internal',
      cloudProviderAws: 'same',
    },
    values: '`true` | `false`',
    default: 'unset',
    mutability: 'replaces the load balancer',
    description:
      'Legacy form of the scheme annotation: anything but `false` means internal. The scheme annotation wins when both are set.',
    apply: (value, o) => {
      o.scheme ??= value === 'false' ? 'internet-facing' : 'internal';
      return undefined;
    },
  },
  {
    name: awsName('subnets'),
    compared: {
      albc: 'same',
      cloudProviderAws:
        'differs: cloud-provider-aws applies it at creation only; here a change moves the NLB with SetSubnets',
    },
    values: 'comma-separated subnet IDs or Name tags, one per Availability Zone',
    default:
      'discovered by the `kubernetes.io/role/elb` (internet-facing) or `kubernetes.io/role/internal-elb` (internal) tag in the cluster VPC',
    mutability: 'in place',
    description: 'The subnets the NLB is placed in.',
    apply: (value, o) => {
      const subnets = list(value);
      if (subnets.length === 0) return 'must name at least one subnet';
      o.subnets = subnets;
      return undefined;
    },
  },
];
