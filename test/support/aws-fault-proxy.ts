import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of the AWS emulator for code that runs in another process (the CLI),
 * where SDK middleware cannot be attached: it passes every request through, except that it
 * answers a query-protocol action (ELBv2, EC2) with an AWS error the next `times` times it is
 * asked for. Loopback only.
 */
export class AwsFaultProxy {
  private readonly faults: { action: string; code: string; remaining: number }[] = [];
  /** Actions answered with an error so far, in order. */
  readonly refused: string[] = [];

  private readonly server: Server;
  private address = '';

  private constructor(private readonly target: string) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const action = new URLSearchParams(body.toString()).get('Action') ?? '';
        const fault = this.take(action);
        if (fault !== undefined) {
          res.writeHead(400, { 'content-type': 'text/xml' });
          res.end(
            `<ErrorResponse><Error><Type>Sender</Type><Code>${fault}</Code><Message>injected by the test</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>`,
          );
          return;
        }
        const url = new URL(req.url ?? '/', this.target);
        const upstream = request(
          url,
          { method: req.method, headers: { ...req.headers, host: url.host } },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        upstream.on('error', (error) => {
          res.writeHead(502);
          res.end(String(error));
        });
        upstream.end(body);
      });
    });
  }

  static async start(target: string): Promise<AwsFaultProxy> {
    const proxy = new AwsFaultProxy(target);
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

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private take(action: string): string | undefined {
    const fault = this.faults.find((f) => f.action === action && f.remaining > 0);
    if (fault === undefined) return undefined;
    fault.remaining--;
    this.refused.push(`${action}: ${fault.code}`);
    return fault.code;
  }
}
