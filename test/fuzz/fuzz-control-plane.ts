// A control plane that pushes whatever the test gives it, for the router-side RouteDiscovery
// fuzz: a grpc-js server (plaintext, on loopback) with the real service definition, one
// router stream at a time, recording every DiscoveryRequest the router sends (hello, ACKs,
// NACKs, live-session reports). The real server (control-plane/src/route-discovery) only
// publishes routes that pass its own validation, so it could never send the malformed
// tables this one does. `pushRaw` sends bytes that are not a DiscoveryResponse at all.
import { Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import {
  RouteDiscoveryService,
  type DiscoveryRequest__Output,
  type DiscoveryResponse,
} from "../../proto/route-discovery-service.js";

type Call = ServerDuplexStream<DiscoveryRequest__Output, DiscoveryResponse | Buffer>;

export class FuzzControlPlane {
  readonly requests: DiscoveryRequest__Output[] = [];
  /** Streams the router opened (it reopens one after a failure). */
  streams = 0;
  private call: Call | undefined;
  private server: Server | undefined;
  private waiters: Array<() => void> = [];

  /** Listens on loopback; resolves with the URL a router dials (http://, plaintext). */
  async start(): Promise<string> {
    const server = new Server();
    const method = RouteDiscoveryService.StreamRoutes;
    // Raw Buffers pass through unencoded: that is how `pushRaw` sends garbage.
    const responseSerialize = (v: DiscoveryResponse | Buffer) =>
      Buffer.isBuffer(v) ? v : method.responseSerialize(v);
    server.addService(
      { StreamRoutes: { ...method, responseSerialize } },
      {
        StreamRoutes: (call: Call) => {
          this.call?.end();
          this.call = call;
          this.streams++;
          call.on("data", (req: DiscoveryRequest__Output) => {
            this.requests.push(req);
            this.notify();
          });
          call.on("error", () => undefined);
          call.on("cancelled", () => {
            if (this.call === call) this.call = undefined;
            this.notify();
          });
          this.notify();
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.server = server;
    return `http://127.0.0.1:${port}`;
  }

  get connected(): boolean {
    return this.call !== undefined;
  }

  /** Pushes `res` and resolves with the router's answer to its nonce (ACK or NACK). */
  async push(res: DiscoveryResponse, timeoutMs = 5000): Promise<DiscoveryRequest__Output> {
    const from = this.requests.length;
    this.call!.write(res);
    return this.until(
      // A NACK of a push without a nonce has none either: tell it from a live report by its error.
      () =>
        this.requests
          .slice(from)
          .find((r) => r.responseNonce === res.nonce && (res.nonce !== "" || r.errorDetail !== null)),
      timeoutMs,
      `the router's answer to nonce ${JSON.stringify(res.nonce)}`,
    );
  }

  /** Writes bytes that are not a DiscoveryResponse on the open stream. */
  pushRaw(bytes: Buffer): void {
    this.call!.write(bytes);
  }

  /** Resolves once `probe` returns something, or fails naming `what`. */
  async until<T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = probe();
      if (v !== undefined) return v;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  async stop(): Promise<void> {
    this.call?.end();
    this.server?.forceShutdown();
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
