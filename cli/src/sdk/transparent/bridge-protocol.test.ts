import { createServer, connect, type Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DatagramReader, encodeDatagram, readLine, writeLine } from "./bridge-protocol.js";

describe("datagram frames", () => {
  it("round-trip host, port and payload, whatever the chunking", () => {
    const frames = Buffer.concat([
      encodeDatagram("10.96.0.10", 53, Buffer.from("query")),
      encodeDatagram("fd00::1", 5353, Buffer.alloc(0)),
      encodeDatagram("db.default.svc", 65535, Buffer.alloc(1500, 7)),
    ]);
    for (const step of [1, 3, 7, frames.length]) {
      const r = new DatagramReader();
      const got = [];
      for (let i = 0; i < frames.length; i += step) got.push(...r.push(frames.subarray(i, i + step)));
      expect(got.map((d) => [d.host, d.port, d.data.length])).toEqual([
        ["10.96.0.10", 53, 5],
        ["fd00::1", 5353, 0],
        ["db.default.svc", 65535, 1500],
      ]);
      expect(got[0]!.data.toString()).toBe("query");
    }
  });

  it("refuses frames that cannot be datagrams", () => {
    const tooLong = Buffer.alloc(8);
    tooLong.writeUInt32BE(1_000_000, 0);
    expect(() => new DatagramReader().push(tooLong)).toThrow(/malformed datagram frame of 1000000 bytes/);
    const hostPastEnd = Buffer.from([0, 0, 0, 3, 200, 0, 0]);
    expect(() => new DatagramReader().push(hostPastEnd)).toThrow(/host longer than the frame/);
    expect(() => encodeDatagram("x".repeat(256), 1, Buffer.alloc(0))).toThrow(/longer than 255/);
  });
});

describe("bridge lines", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  async function pair(): Promise<[Socket, Socket, () => void]> {
    const dir = mkdtempSync(join(tmpdir(), "bridge-line-"));
    dirs.push(dir);
    let accepted!: (s: Socket) => void;
    const got = new Promise<Socket>((r) => (accepted = r));
    const server = createServer((s) => accepted(s));
    await new Promise<void>((r) => server.listen(join(dir, "s.sock"), r));
    const client = connect({ path: join(dir, "s.sock") });
    const srv = await got;
    return [client, srv, () => server.close()];
  }

  it("reads one JSON line and leaves what follows it for the next reader", async () => {
    const [client, srv, close] = await pair();
    client.write('{"op":"tcp","host":"a","port":1}\nRAW');
    expect(await readLine(srv)).toEqual({ op: "tcp", host: "a", port: 1 });
    const rest = await new Promise<Buffer>((r) => {
      srv.once("data", r);
      srv.resume();
    });
    expect(rest.toString()).toBe("RAW");
    writeLine(srv, { ok: true });
    expect(await readLine(client)).toEqual({ ok: true });
    client.destroy();
    srv.destroy();
    close();
  });

  it("rejects an over-long line, malformed JSON and a connection closed early", async () => {
    let [client, srv, close] = await pair();
    client.write("x".repeat(100));
    await expect(readLine(srv, 50)).rejects.toThrow(/longer than 50 bytes/);
    client.destroy();
    close();
    [client, srv, close] = await pair();
    client.write("{nope\n");
    await expect(readLine(srv)).rejects.toThrow(/malformed bridge line/);
    client.destroy();
    close();
    [client, srv, close] = await pair();
    const p = readLine(srv);
    client.end();
    await expect(p).rejects.toThrow(/closed before its line/);
    close();
  });
});
