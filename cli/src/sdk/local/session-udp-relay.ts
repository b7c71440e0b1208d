// The CLI's `UdpRelay`: each SOCKS5 UDP association gets one outgoing UDP channel of the
// session (a socket on the Default cluster), bound when its first datagram is sent, with
// that datagram's destination as the channel's default peer (names resolve remotely).
// Datagrams sent while the bind is in flight wait in a small queue; beyond it they are
// dropped, as UDP may. A failed bind ends the flow with the session's error.
import type { UdpChannel } from "../session/udp-channel.js";
import type { UdpFlow, UdpRelay } from "./socks-udp-association.js";

/** Datagrams held per flow while its channel is being bound. */
export const UDP_BIND_QUEUE = 64;

export interface UdpBinder {
  bindUdp(host: string, port: number): Promise<UdpChannel>;
}

export function sessionUdpRelay(client: UdpBinder, onError?: (target: string, err: Error) => void): UdpRelay {
  return { open: () => new SessionUdpFlow(client, onError) };
}

type MessageListener = (from: { host: string; port: number }, data: Buffer) => void;

class SessionUdpFlow implements UdpFlow {
  #channel: UdpChannel | undefined;
  /** Set from the first send until the bind settles. */
  #queue: Array<{ host: string; port: number; data: Buffer }> | undefined;
  #closed = false;
  readonly #onMessage: MessageListener[] = [];
  readonly #onClose: Array<(error: string) => void> = [];

  constructor(
    private readonly client: UdpBinder,
    private readonly onError: ((target: string, err: Error) => void) | undefined,
  ) {}

  send(host: string, port: number, data: Buffer): void {
    if (this.#closed) return;
    if (this.#channel) return void this.#channel.send(data, host, port);
    if (this.#queue) {
      if (this.#queue.length < UDP_BIND_QUEUE) this.#queue.push({ host, port, data });
      return;
    }
    this.#queue = [{ host, port, data }];
    this.client.bindUdp(host, port).then(
      (ch) => this.#bound(ch),
      (err: Error) => {
        this.onError?.(`${host}:${port}`, err);
        this.#end(`cannot open UDP to ${host}:${port} from the cluster: ${err.message}`);
      },
    );
  }

  onMessage(listener: MessageListener): void {
    this.#onMessage.push(listener);
  }

  onClose(listener: (error: string) => void): void {
    this.#onClose.push(listener);
  }

  /** Closes the channel; the owner's own close is not reported to onClose listeners. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = undefined;
    this.#channel?.close();
  }

  #bound(ch: UdpChannel): void {
    if (this.#closed) return void ch.close();
    this.#channel = ch;
    ch.on("message", (m) => {
      for (const l of this.#onMessage) l({ host: m.address, port: m.port }, m.data);
    });
    ch.on("close", (error) => this.#end(error || "the cluster closed the UDP socket"));
    const queued = this.#queue ?? [];
    this.#queue = undefined;
    for (const d of queued) ch.send(d.data, d.host, d.port);
  }

  #end(error: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = undefined;
    this.#channel?.close();
    for (const l of this.#onClose) l(error);
  }
}
