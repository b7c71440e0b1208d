// The resolver of the command's namespace, at 127.0.0.1:53 (UDP and TCP): each query goes
// as it is to the pod's nameserver through the Default cluster, so every record type and
// the pod's search domains (in the namespace's resolv.conf) answer as they do in the pod.
// UDP queries share one flow; each gets an id of the resolver's own (the clients' ids may
// collide) and its answer goes back to whoever asked, with the client's id restored.
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from "node:dgram";
import { createServer, type Server, type Socket } from "node:net";
import type { UdpFlow, UdpRelay } from "../local/local-proxy.js";
import { splice } from "../local/splice.js";

export interface NamespaceDnsOptions {
  nameservers: string[];
  udp: UdpRelay;
  dialTcp(host: string, port: number): Promise<Socket>;
  host?: string;
  port?: number;
  /** How long a UDP query waits for its answer before the next nameserver is asked, ms. */
  timeoutMs?: number;
}

interface Pending {
  client: RemoteInfo;
  clientId: number;
  query: Buffer;
  server: number;
  timer: NodeJS.Timeout;
}

export class NamespaceDns {
  #udpServer: UdpSocket | undefined;
  #tcpServer: Server | undefined;
  #flow: UdpFlow | undefined;
  readonly #pending = new Map<number, Pending>();
  readonly #tcpSockets = new Set<Socket>();
  #nextId = Math.floor(Math.random() * 0x10000);
  /** Counters for tests. */
  readonly stats = { udpQueries: 0, tcpQueries: 0, unanswered: 0 };

  constructor(private readonly o: NamespaceDnsOptions) {
    if (o.nameservers.length === 0) throw new Error("the pod's resolv.conf names no nameserver");
  }

  /** The UDP port it answers on (53 unless told otherwise). */
  get udpPort(): number {
    return this.#udpServer?.address().port ?? 0;
  }

  async listen(): Promise<void> {
    const host = this.o.host ?? "127.0.0.1";
    const port = this.o.port ?? 53;
    const udp = createSocket("udp4");
    udp.on("message", (msg, rinfo) => this.#query(msg, rinfo));
    await new Promise<void>((resolve, reject) => {
      udp.once("error", reject);
      udp.bind(port, host, () => resolve());
    });
    udp.on("error", () => {});
    this.#udpServer = udp;
    const tcp = createServer((s) => void this.#tcp(s));
    await new Promise<void>((resolve, reject) => {
      tcp.once("error", reject);
      tcp.listen(this.udpPort, host, () => resolve());
    });
    this.#tcpServer = tcp;
  }

  close(): void {
    for (const p of this.#pending.values()) clearTimeout(p.timer);
    this.#pending.clear();
    this.#flow?.close();
    this.#udpServer?.close();
    this.#tcpServer?.close();
    for (const s of this.#tcpSockets) s.destroy();
  }

  #flowOpen(): UdpFlow {
    if (this.#flow) return this.#flow;
    const flow = this.o.udp.open();
    flow.onMessage((_from, data) => this.#answer(data));
    flow.onClose(() => {
      if (this.#flow === flow) this.#flow = undefined;
    });
    this.#flow = flow;
    return flow;
  }

  #query(msg: Buffer, client: RemoteInfo): void {
    if (msg.length < 12) return;
    this.stats.udpQueries++;
    let id = this.#nextId;
    for (let i = 0; i < 0x10000 && this.#pending.has(id); i++) id = (id + 1) & 0xffff;
    if (this.#pending.has(id)) return; // 65,536 queries in flight: drop (the client retries)
    this.#nextId = (id + 1) & 0xffff;
    const query = Buffer.from(msg);
    const clientId = query.readUInt16BE(0);
    query.writeUInt16BE(id, 0);
    this.#send({ client, clientId, query, server: 0, timer: undefined as unknown as NodeJS.Timeout }, id);
  }

  #send(p: Pending, id: number): void {
    p.timer = setTimeout(() => {
      this.#pending.delete(id);
      if (p.server + 1 < this.o.nameservers.length) this.#send({ ...p, server: p.server + 1 }, id);
      else this.stats.unanswered++;
    }, this.o.timeoutMs ?? 2000);
    p.timer.unref();
    this.#pending.set(id, p);
    this.#flowOpen().send(this.o.nameservers[p.server]!, 53, p.query);
  }

  #answer(data: Buffer): void {
    if (data.length < 12) return;
    const id = data.readUInt16BE(0);
    const p = this.#pending.get(id);
    if (!p) return;
    clearTimeout(p.timer);
    this.#pending.delete(id);
    const answer = Buffer.from(data);
    answer.writeUInt16BE(p.clientId, 0);
    this.#udpServer?.send(answer, p.client.port, p.client.address);
  }

  async #tcp(client: Socket): Promise<void> {
    this.stats.tcpQueries++;
    this.#tcpSockets.add(client);
    client.on("close", () => this.#tcpSockets.delete(client));
    client.on("error", () => client.destroy());
    client.pause();
    let upstream: Socket;
    try {
      upstream = await this.o.dialTcp(this.o.nameservers[0]!, 53);
    } catch {
      client.destroy();
      return;
    }
    splice(client, upstream);
    client.resume();
  }
}
