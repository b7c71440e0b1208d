// Test helper: a protocol-level RouteDiscovery stream (no client logic) that records every
// response and checks the protocol invariants on each one as it arrives: nonces strictly
// increase on a stream, versions are never empty. Used by the server's protocol tests.
import { credentials, Metadata, status, type StatusObject } from "@grpc/grpc-js";
import {
  RouteDiscoveryGrpcClient,
  routeDiscoveryTarget,
  type DiscoveryRequest,
  type DiscoveryResponse__Output,
} from "../../../proto/route-discovery-service.js";

export interface RawStreamOptions {
  url: string;
  ca?: string;
  cert?: string;
  key?: string;
  token?: string;
}

export class RawDiscoveryStream {
  readonly responses: DiscoveryResponse__Output[] = [];
  /** Settles when the stream ends: undefined for OK, the status otherwise. */
  readonly ended: Promise<StatusObject | undefined>;
  readonly invariantViolations: string[] = [];
  private waiters: Array<() => void> = [];
  private readonly client: InstanceType<typeof RouteDiscoveryGrpcClient>;
  private readonly call: ReturnType<InstanceType<typeof RouteDiscoveryGrpcClient>["streamRoutes"]>;

  constructor(opts: RawStreamOptions) {
    const url = new URL(opts.url);
    const creds =
      url.protocol === "https:"
        ? credentials.createSsl(
            opts.ca ? Buffer.from(opts.ca) : null,
            opts.key ? Buffer.from(opts.key) : null,
            opts.cert ? Buffer.from(opts.cert) : null,
          )
        : credentials.createInsecure();
    // A connection of its own: streams of one test must not share one.
    this.client = new RouteDiscoveryGrpcClient(routeDiscoveryTarget(url), creds, {
      "grpc.use_local_subchannel_pool": 1,
    });
    const metadata = new Metadata();
    if (opts.token !== undefined) metadata.set("authorization", `Bearer ${opts.token}`);
    this.call = this.client.streamRoutes(metadata);
    this.call.on("data", (res: DiscoveryResponse__Output) => {
      this.check(res);
      this.responses.push(res);
      this.notify();
    });
    // Failures arrive as the status below; without a listener an 'error' event would throw.
    this.call.on("error", () => undefined);
    this.ended = new Promise((resolve) => {
      this.call.on("status", (s: StatusObject) => {
        resolve(s.code === status.OK ? undefined : s);
        this.notify();
      });
    });
  }

  send(req: DiscoveryRequest): void {
    this.call.write(req);
  }

  /** ACKs response `res` (version = its version). */
  ack(res: DiscoveryResponse__Output): void {
    this.send({ versionInfo: res.versionInfo, responseNonce: res.nonce });
  }

  /** Waits until at least `n` responses have arrived (or the stream ended). */
  async waitFor(n: number): Promise<DiscoveryResponse__Output> {
    let ended = false;
    void this.ended.then(() => (ended = true));
    while (this.responses.length < n) {
      if (ended) throw new Error(`stream ended with ${this.responses.length} responses, wanted ${n}`);
      await new Promise<void>((r) => this.waiters.push(r));
      await Promise.resolve();
    }
    return this.responses[n - 1]!;
  }

  /** Half-closes: no more requests. */
  close(): void {
    this.call.end();
  }

  cancel(): void {
    this.call.cancel();
    this.client.close();
  }

  private notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private check(res: DiscoveryResponse__Output): void {
    if (res.versionInfo === "") this.invariantViolations.push(`empty version at nonce ${res.nonce}`);
    const prev = this.responses.at(-1);
    if (!/^[0-9]+$/.test(res.nonce)) this.invariantViolations.push(`nonce "${res.nonce}" is not a counter`);
    else if (prev && BigInt(res.nonce) <= BigInt(prev.nonce)) {
      this.invariantViolations.push(`nonce ${res.nonce} does not increase after ${prev.nonce}`);
    }
  }
}
