import {
  createServer,
  request,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the emulator answered to a request whose answer the proxy holds back (`holdNext`). */
export interface HeldAnswer {
  readonly action: string;
  /** The emulator's status: 200 means the call took effect there. */
  readonly status: number;
  /** The emulator's answer, never sent to the caller. */
  readonly body: string;
}

/** A security group the emulator created that callers do not see yet (`hideCreatedSecurityGroup`). */
interface HiddenGroup {
  readonly id: string;
  readonly hiddenUntil: number;
  authorizeRefusals: number;
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

/**
 * An HTTP proxy in front of the AWS emulator for code that runs in another process (the CLI),
 * where SDK middleware cannot be attached. It passes every request through, except:
 *
 * - `failNext`: a query-protocol action (ELBv2, EC2) is answered with an AWS error the next
 *   `times` times it is asked for;
 * - `hideCreatedSecurityGroup`: EC2's eventual consistency right after CreateSecurityGroup, for
 *   the next group created: its first AuthorizeSecurityGroupIngress calls and, meanwhile, its
 *   lookups by ID answer `InvalidGroup.NotFound`, and listings (a filter by group name) leave it out;
 * - `holdNext`: an action reaches the emulator and takes effect there, but its answer never
 *   comes back, so a test can kill the caller at that moment.
 *
 * Errors have the shape of the service's protocol: EC2's `<Response><Errors>`, otherwise the
 * query protocol's `<ErrorResponse>` (ELBv2). With `accountId`, every request is made in that
 * moto account (moto's `x-moto-account-id` header), so a process that cannot set the header
 * still gets an account of its own. Loopback only.
 */
export class AwsFaultProxy {
  private readonly faults: { action: string; code: string; remaining: number }[] = [];
  private readonly holds: { action: string; resolve: (held: HeldAnswer) => void }[] = [];
  private hideNext: { authorizeRefusals: number; lookupsHiddenMs: number } | undefined;
  private readonly hidden: HiddenGroup[] = [];
  /** Requests answered with an error (or a listing short of a hidden group) so far, in order. */
  readonly refused: string[] = [];
  /** Actions whose answers are held, in order. */
  readonly held: string[] = [];

  private readonly server: Server;
  private address = '';

  private constructor(
    private readonly target: string,
    private readonly accountId: string | undefined,
  ) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        void this.handle(req, Buffer.concat(chunks), res).catch((error: unknown) => {
          if (res.headersSent) {
            res.destroy();
            return;
          }
          res.writeHead(502);
          res.end(String(error));
        });
      });
    });
  }

  static async start(target: string, options: { accountId?: string } = {}): Promise<AwsFaultProxy> {
    const proxy = new AwsFaultProxy(target, options.accountId);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    proxy.address = `http://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
    return proxy;
  }

  /** Where to point AWS_ENDPOINT_URL. */
  get url(): string {
    return this.address;
  }

  /** The next `times` requests for `action` get the error `code`. */
  failNext(action: string, code: string, times: number): void {
    this.faults.push({ action, code, remaining: times });
  }

  /**
   * The next security group CreateSecurityGroup creates is not visible at first, as in EC2 right
   * after the call: its first `authorizeRefusals` AuthorizeSecurityGroupIngress calls answer
   * `InvalidGroup.NotFound`. Until they are spent, but for at most `lookupsHiddenMs` after the
   * create (so code that waits to see the group before it authorizes sees it in the end), its
   * lookups by ID answer `InvalidGroup.NotFound` too, and other DescribeSecurityGroups answers (a
   * filter by its name) leave it out.
   */
  hideCreatedSecurityGroup(options: { authorizeRefusals: number; lookupsHiddenMs: number }): void {
    this.hideNext = { ...options };
  }

  /**
   * The next request for `action` is passed to the emulator, which acts on it, but its answer is
   * held back for ever (until `stop`). Resolves once the emulator has answered.
   */
  holdNext(action: string): Promise<HeldAnswer> {
    return new Promise((resolve) => this.holds.push({ action, resolve }));
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    const params = new URLSearchParams(body.toString());
    const action = params.get('Action') ?? '';
    const ec2 = isEc2(req, params);
    const fault = this.take(action);
    if (fault !== undefined) {
      this.refuse(res, ec2, action, fault, 'injected by the test');
      return;
    }
    const hold = this.holds.find((h) => h.action === action);
    if (hold !== undefined) {
      this.holds.splice(this.holds.indexOf(hold), 1);
      const answer = await this.forward(req, body);
      this.held.push(action);
      // The caller's socket stays open and unanswered; stop() closes it.
      hold.resolve({ action, status: answer.status, body: answer.body.toString() });
      return;
    }
    if (ec2 && (await this.consistency(req, body, params, action, res))) return;
    this.pipe(req, body, res);
  }

  /** EC2's view of a group just created; true when it answered the request. */
  private async consistency(
    req: IncomingMessage,
    body: Buffer,
    params: URLSearchParams,
    action: string,
    res: ServerResponse,
  ): Promise<boolean> {
    if (action === 'CreateSecurityGroup' && this.hideNext !== undefined) {
      const answer = await this.forward(req, body);
      const id = /<groupId>(sg-[0-9a-f]+)<\/groupId>/.exec(answer.body.toString())?.[1];
      if (answer.status === 200 && id !== undefined) {
        this.hidden.push({
          id,
          authorizeRefusals: this.hideNext.authorizeRefusals,
          hiddenUntil: Date.now() + this.hideNext.lookupsHiddenMs,
        });
        this.hideNext = undefined;
      }
      this.send(res, answer);
      return true;
    }
    if (action === 'AuthorizeSecurityGroupIngress') {
      const group = this.hidden.find((g) => g.id === params.get('GroupId'));
      if (group === undefined || group.authorizeRefusals === 0) return false;
      group.authorizeRefusals--;
      this.refuse(res, true, action, 'InvalidGroup.NotFound', notFound(group.id));
      return true;
    }
    if (action !== 'DescribeSecurityGroups') return false;
    const invisible = this.hidden.filter(
      (g) => g.authorizeRefusals > 0 && Date.now() < g.hiddenUntil,
    );
    if (invisible.length === 0) return false;
    const named = indexed(params, 'GroupId');
    const byId = invisible.find((g) => named.includes(g.id));
    if (byId !== undefined) {
      this.refuse(res, true, action, 'InvalidGroup.NotFound', notFound(byId.id));
      return true;
    }
    const answer = await this.forward(req, body);
    let text = answer.body.toString();
    for (const group of invisible) {
      const without = withoutSecurityGroup(text, group.id);
      if (without !== text) this.refused.push(`${action}: ${group.id} left out`);
      text = without;
    }
    this.send(res, { ...answer, body: Buffer.from(text) });
    return true;
  }

  private refuse(
    res: ServerResponse,
    ec2: boolean,
    action: string,
    code: string,
    message: string,
  ): void {
    this.refused.push(`${action}: ${code}`);
    res.writeHead(400, { 'content-type': 'text/xml' });
    res.end(
      ec2
        ? `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${code}</Code><Message>${message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>`
        : `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>`,
    );
  }

  private upstream(req: IncomingMessage, onAnswer: (answer: IncomingMessage) => void) {
    const url = new URL(req.url ?? '/', this.target);
    return request(
      url,
      {
        method: req.method,
        headers: {
          ...req.headers,
          host: url.host,
          ...(this.accountId !== undefined ? { 'x-moto-account-id': this.accountId } : {}),
        },
      },
      onAnswer,
    );
  }

  /** Passes the request on and streams the answer back. */
  private pipe(req: IncomingMessage, body: Buffer, res: ServerResponse): void {
    const upstream = this.upstream(req, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (error) => {
      res.writeHead(502);
      res.end(String(error));
    });
    upstream.end(body);
  }

  /** Passes the request on and reads the whole answer, for the proxy to look at first. */
  private forward(req: IncomingMessage, body: Buffer): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const upstream = this.upstream(req, (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('error', reject);
        answer.on('end', () =>
          resolve({
            status: answer.statusCode ?? 502,
            headers: answer.headers,
            body: Buffer.concat(chunks),
          }),
        );
      });
      upstream.on('error', reject);
      upstream.end(body);
    });
  }

  private send(res: ServerResponse, answer: Answer): void {
    const headers = { ...answer.headers };
    delete headers['transfer-encoding'];
    headers['content-length'] = String(answer.body.length);
    res.writeHead(answer.status, headers);
    res.end(answer.body);
  }

  private take(action: string): string | undefined {
    const fault = this.faults.find((f) => f.action === action && f.remaining > 0);
    if (fault === undefined) return undefined;
    fault.remaining--;
    return fault.code;
  }
}

/** EC2 speaks its own query dialect, with its own error shape: told by the SigV4 scope. */
function isEc2(req: IncomingMessage, params: URLSearchParams): boolean {
  const scope = /Credential=[^/]+\/[^/]+\/[^/]+\/([^/]+)\//.exec(req.headers.authorization ?? '');
  if (scope?.[1] !== undefined) return scope[1] === 'ec2';
  return params.get('Version') === '2016-11-15';
}

/** The values of an EC2 list parameter: `GroupId.1`, `GroupId.2`, … */
function indexed(params: URLSearchParams, name: string): string[] {
  return [...params]
    .filter(([key]) => key === name || new RegExp(`^${name}\\.\\d+$`).test(key))
    .map(([, value]) => value);
}

function notFound(id: string): string {
  return `The security group '${id}' does not exist`;
}

/** A DescribeSecurityGroups answer without the top-level `<item>` of group `id`. */
export function withoutSecurityGroup(xml: string, id: string): string {
  const from = xml.indexOf('<securityGroupInfo>');
  const to = xml.indexOf('</securityGroupInfo>');
  if (from < 0 || to < 0) return xml;
  const tag = /<(\/?)item>/g;
  tag.lastIndex = from;
  let depth = 0;
  let start = 0;
  for (let match = tag.exec(xml); match !== null && match.index < to; match = tag.exec(xml)) {
    if (match[1] === '') {
      if (depth++ === 0) start = match.index;
      continue;
    }
    if (--depth > 0) continue;
    const end = match.index + match[0].length;
    if (groupIdOf(xml.slice(start, end)) === id) return xml.slice(0, start) + xml.slice(end);
  }
  return xml;
}

/** An item's own groupId: the one at its top level (items nested in it name other groups). */
function groupIdOf(item: string): string | undefined {
  let depth = 0;
  const token = /<(\/?)item>|<groupId>([^<]*)<\/groupId>/g;
  for (let match = token.exec(item); match !== null; match = token.exec(item)) {
    if (match[2] !== undefined) {
      if (depth === 1) return match[2];
    } else {
      depth += match[1] === '' ? 1 : -1;
    }
  }
  return undefined;
}
