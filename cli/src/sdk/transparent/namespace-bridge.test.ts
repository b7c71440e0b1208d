// Both ends of the bridge over a real Unix socket: the helper's requests reach the CLI's
// dialers (the session's, faked here by real local servers) or this machine, as the address says.
import { createSocket } from "node:dgram";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { UdpFlow } from "../local/local-proxy.js";
import {
  readLine,
  writeLine,
  type NamespaceBase,
  type NamespaceSetup,
  type SetupLine,
} from "./bridge-protocol.js";
import { bridgeRequest, bridgeTcp, bridgeUdpRelay } from "./helper-bridge.js";
import { NamespaceBridge, type SessionOutgoing } from "./namespace-bridge.js";
import { keepLocalList, sweepStaleRuns } from "./transparent-run.js";

const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function tagServer(tag: string): Promise<number> {
  const s: Server = createServer((c) => c.end(tag));
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  closers.push(() => s.close());
  return (s.address() as { port: number }).port;
}

const read = (s: NodeJS.ReadableStream) =>
  new Promise<string>((resolve) => {
    let b = "";
    s.on("data", (d: Buffer) => (b += d.toString()));
    s.on("end", () => resolve(b));
  });

const BASE: NamespaceBase = {
  uid: 1000,
  gid: 1000,
  tun2socks: "/bin/tun2socks",
  dir: "/tmp/x",
  quiet: false,
};

async function bridge(opts: { remotePort: number; keep?: string[]; fail?: string; open?: boolean }) {
  const dir = mkdtempSync(join(tmpdir(), "bridge-"));
  closers.push(() => rmSync(dir, { recursive: true, force: true }));
  const dialed: string[] = [];
  const flows: Array<{ sent: string[] }> = [];
  const keep = keepLocalList(opts.keep ?? []);
  const outgoing: SessionOutgoing = {
    dial: async (host, port) => {
      dialed.push(`${host}:${port}`);
      if (opts.fail) throw new Error(opts.fail);
      return connect({ host: "127.0.0.1", port: opts.remotePort });
    },
    udp: {
      open(): UdpFlow {
        const sent: string[] = [];
        flows.push({ sent });
        let listener: (f: { host: string; port: number }, d: Buffer) => void = () => {};
        return {
          send: (host, port, data) => {
            sent.push(`${host}:${port}:${data.toString()}`);
            setImmediate(() => listener({ host, port }, Buffer.from(`re:${data.toString()}`)));
          },
          onMessage: (l) => (listener = l),
          onClose: () => {},
          close: () => {},
        };
      },
    },
  };
  const b = new NamespaceBridge({
    path: join(dir, "bridge.sock"),
    base: BASE,
    ...(opts.open === false
      ? {}
      : { setup: { command: ["true"] } as unknown as NamespaceSetup, ...outgoing }),
    keepLocal: (a) => keep.check(a),
  });
  await b.listen();
  closers.push(() => b.close());
  return { b, path: b.path, dialed, flows, outgoing };
}

describe("namespace bridge", () => {
  it("sends cluster addresses through the session, loopback and kept-local addresses from this machine", async () => {
    const remote = await tagServer("from-the-cluster");
    const local = await tagServer("from-this-machine");
    const { path, dialed, b } = await bridge({ remotePort: remote, keep: ["192.0.2.0/24"] });
    expect(await read(await bridgeTcp(path, "10.96.12.7", 5432))).toBe("from-the-cluster");
    expect(await read(await bridgeTcp(path, "127.0.0.1", local))).toBe("from-this-machine");
    expect(await read(await bridgeTcp(path, "localhost", local, true))).toBe("from-this-machine");
    expect(dialed).toEqual(["10.96.12.7:5432"]);
    // Kept local: dialled here (and refused: nothing listens at that documentation address).
    await expect(bridgeTcp(path, "192.0.2.1", 9)).rejects.toThrow();
    expect(dialed).toEqual(["10.96.12.7:5432"]);
    expect(b.stats).toMatchObject({ tcp: 4, local: 3 });
  });

  it("answers a failed dial with the session's reason", async () => {
    const { path } = await bridge({ remotePort: 1, fail: "cannot connect to 10.0.0.9:80: ECONNREFUSED" });
    await expect(bridgeTcp(path, "10.0.0.9", 80)).rejects.toThrow(
      "cannot connect to 10.0.0.9:80: ECONNREFUSED",
    );
  });

  it("carries a UDP flow's datagrams both ways, loopback ones from this machine", async () => {
    const { path, flows } = await bridge({ remotePort: 1 });
    const echo = createSocket("udp4");
    echo.on("message", (m, r) => echo.send(Buffer.from(`local:${m.toString()}`), r.port, r.address));
    await new Promise<void>((r) => echo.bind(0, "127.0.0.1", r));
    closers.push(() => echo.close());
    const flow = bridgeUdpRelay(path).open();
    closers.push(() => flow.close());
    const got: string[] = [];
    flow.onMessage((from, d) => got.push(`${from.host}:${d.toString()}`));
    flow.send("10.96.0.10", 53, Buffer.from("q1"));
    flow.send("127.0.0.1", echo.address().port, Buffer.from("q2"));
    for (let i = 0; i < 100 && got.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(got.sort()).toEqual(["10.96.0.10:re:q1", "127.0.0.1:local:q2"]);
    expect(flows.map((f) => f.sent)).toEqual([["10.96.0.10:53:q1"]]);
  });

  it("hands the helper its setup and learns whether the namespace is ready", async () => {
    const { path, b } = await bridge({ remotePort: 1 });
    const { socket, answer } = await bridgeRequest(path, { op: "setup" });
    expect(answer).toEqual({ ok: true, base: BASE });
    expect(await readLine<SetupLine>(socket)).toEqual({ setup: { command: ["true"] } });
    writeLine(socket, { ready: false, error: "ip: not found" });
    expect(await b.ready()).toEqual({ ready: false, error: "ip: not found" });
    socket.destroy();
  });

  it("gives the helper its base before the session is open, and the rest once it is", async () => {
    const remote = await tagServer("from-the-cluster");
    const { path, b, outgoing, dialed } = await bridge({ remotePort: remote, open: false });
    const { socket, answer } = await bridgeRequest(path, { op: "setup" });
    expect(answer).toEqual({ ok: true, base: BASE });
    // Nothing of the namespace leaves before the session is open, not even from this machine.
    await expect(bridgeTcp(path, "10.96.12.7", 5432)).rejects.toThrow("the session is not open yet");
    const early = bridgeUdpRelay(path).open();
    const closed = new Promise<void>((r) => early.onClose(() => r()));
    early.send("10.96.0.10", 53, Buffer.from("q0"));
    await closed;
    let next: SetupLine | undefined;
    void readLine<SetupLine>(socket).then((l) => (next = l));
    await new Promise((r) => setTimeout(r, 50));
    expect(next).toBeUndefined();
    const setup = { command: ["app"], deliverPorts: [9000] } as unknown as NamespaceSetup;
    b.configure(setup, outgoing);
    b.cancel("too late: already configured");
    for (let i = 0; i < 100 && !next; i++) await new Promise((r) => setTimeout(r, 10));
    expect(next).toEqual({ setup });
    expect(await read(await bridgeTcp(path, "10.96.12.7", 5432))).toBe("from-the-cluster");
    expect(dialed).toEqual(["10.96.12.7:5432"]);
    // One helper: a second control line is refused.
    const second = await bridgeRequest(path, { op: "setup" });
    expect(second.answer).toEqual({ ok: false, error: "the namespace helper is already connected" });
    second.socket.destroy();
    socket.destroy();
  });

  it("tells a helper that connects after a cancel to end", async () => {
    const { path, b } = await bridge({ remotePort: 1, open: false });
    b.cancel("the session did not open");
    const { socket } = await bridgeRequest(path, { op: "setup" });
    expect(await readLine<SetupLine>(socket)).toEqual({ cancel: "the session did not open" });
    socket.destroy();
  });

  it("refuses an unknown request", async () => {
    const { path } = await bridge({ remotePort: 1 });
    const s = connect({ path });
    s.write('{"op":"mount"}\n');
    expect(await readLine(s)).toEqual({ ok: false, error: "unknown bridge request" });
    s.destroy();
  });

  it("names a bad --keep-local entry", () => {
    expect(() => keepLocalList(["10.0.0.0/33"])).toThrow(
      /--keep-local "10.0.0.0\/33" is not an address or CIDR/,
    );
    expect(() => keepLocalList(["laptop.local"])).toThrow(/is not an address or CIDR/);
    expect(keepLocalList(["fd00::/8", "10.1.2.3"]).check("fd00::5", "ipv6")).toBe(true);
  });
});

describe("stale runs", () => {
  it("removes only this user's old run directories whose bridge no longer answers", async () => {
    const root = mkdtempSync(join(tmpdir(), "stale-"));
    closers.push(() => rmSync(root, { recursive: true, force: true }));
    const old = Date.now() / 1000 - 3600;
    const dead = join(root, "switchyard-ns-dead");
    const fresh = join(root, "switchyard-ns-fresh");
    const live = join(root, "switchyard-ns-live");
    const other = join(root, "unrelated");
    for (const d of [dead, fresh, live, other]) mkdirSync(d);
    const server = createServer(() => {});
    await new Promise<void>((r) => server.listen(join(live, "bridge.sock"), r));
    closers.push(() => server.close());
    for (const d of [dead, live, other]) utimesSync(d, old, old);
    expect(await sweepStaleRuns(root)).toEqual([dead]);
    expect(readdirSync(root).sort()).toEqual(["switchyard-ns-fresh", "switchyard-ns-live", "unrelated"]);
  });
});
