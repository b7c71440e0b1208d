// A relay port for the kubelet's probes of the target: every connection is piped to the app,
// whatever the sessions subscribe. The sidecar template points the app's probes on a port the
// agent takes over at one of these (control-plane/src/member/sidecar-probes.ts), so a
// developer's local process never answers the deployed pod's health checks.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export interface ProbeRelayOptions {
  listenPort: number;
  listenHost: string;
  appHost: string;
  appPort: number;
}

export class ProbeRelay {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly opts: ProbeRelayOptions) {
    this.server = createServer((client) => this.relay(client));
  }

  private relay(client: Socket): void {
    const app = createConnection({ host: this.opts.appHost, port: this.opts.appPort });
    for (const s of [client, app]) {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    }
    // Either side failing ends both: the kubelet sees a refused or reset probe, as it would
    // probing the app directly.
    client.on("error", () => app.destroy());
    app.on("error", () => client.destroy());
    client.pipe(app);
    app.pipe(client);
  }

  /** Listens; resolves with the port. */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.opts.listenPort, this.opts.listenHost, () => resolve());
    });
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
