// Test helper: a protocol-level RouteDiscovery stream (no client logic) that records every
// response and checks the protocol invariants on each one as it arrives: nonces strictly
// increase on a stream, versions are never empty. Used by the server's protocol tests.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  DiscoveryRequestSchema,
  RouteDiscovery,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from "../../../proto/gen/route_discovery_pb.js";

export interface RawStreamOptions {
  url: string;
  ca?: string;
  cert?: string;
  key?: string;
  token?: string;
}

export class RawDiscoveryStream {
  readonly responses: DiscoveryResponse[] = [];
  /** Settles when the server ends the stream: undefined for OK, the ConnectError otherwise. */
  readonly ended: Promise<ConnectError | undefined>;
  readonly invariantViolations: string[] = [];
  private readonly queue: DiscoveryRequest[] = [];
  private wakeSender: (() => void) | undefined;
  private closed = false;
  private waiters: Array<() => void> = [];
  private readonly abort = new AbortController();

  constructor(opts: RawStreamOptions) {
    const transport = createGrpcTransport({
      baseUrl: opts.url,
      nodeOptions: { ca: opts.ca, cert: opts.cert, key: opts.key },
    });
    const client = createClient(RouteDiscovery, transport);
    const requests = this.requests();
    const headers = opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : undefined;
    this.ended = (async () => {
      try {
        for await (const res of client.streamRoutes(requests, { headers, signal: this.abort.signal })) {
          this.check(res);
          this.responses.push(res);
          this.notify();
        }
        return undefined;
      } catch (err) {
        return ConnectError.from(err);
      } finally {
        this.notify();
      }
    })();
  }

  send(init: MessageInitShape<typeof DiscoveryRequestSchema>): void {
    this.queue.push(create(DiscoveryRequestSchema, init));
    this.wakeSender?.();
  }

  /** ACKs response `res` (version = its version). */
  ack(res: DiscoveryResponse): void {
    this.send({ versionInfo: res.versionInfo, responseNonce: res.nonce });
  }

  /** Waits until at least `n` responses have arrived (or the stream ended). */
  async waitFor(n: number): Promise<DiscoveryResponse> {
    let ended = false;
    void this.ended.then(() => (ended = true));
    while (this.responses.length < n) {
      if (ended) throw new Error(`stream ended with ${this.responses.length} responses, wanted ${n}`);
      await new Promise<void>((r) => this.waiters.push(r));
      await Promise.resolve();
    }
    return this.responses[n - 1]!;
  }

  close(): void {
    this.closed = true;
    this.wakeSender?.();
  }

  cancel(): void {
    this.abort.abort();
  }

  private notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private check(res: DiscoveryResponse): void {
    if (res.versionInfo === "") this.invariantViolations.push(`empty version at nonce ${res.nonce}`);
    const prev = this.responses.at(-1);
    if (!/^[0-9]+$/.test(res.nonce)) this.invariantViolations.push(`nonce "${res.nonce}" is not a counter`);
    else if (prev && BigInt(res.nonce) <= BigInt(prev.nonce)) {
      this.invariantViolations.push(`nonce ${res.nonce} does not increase after ${prev.nonce}`);
    }
  }

  private async *requests(): AsyncGenerator<DiscoveryRequest> {
    for (;;) {
      const next = this.queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((r) => (this.wakeSender = r));
    }
  }
}
