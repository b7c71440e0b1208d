import { once } from "node:events";
import { createConnection, createServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { coalesceWrites } from "./coalesced-writes.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function pair(): Promise<{ client: Socket; server: Socket }> {
  const srv = createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const client = createConnection((srv.address() as AddressInfo).port, "127.0.0.1");
  const [server] = (await once(srv, "connection")) as [Socket];
  await once(client, "connect");
  cleanups.push(() => {
    client.destroy();
    server.destroy();
    srv.close();
  });
  return { client, server };
}

describe("coalesceWrites", () => {
  it("holds writes made in one turn of the event loop and sends them together, in order", async () => {
    const { client, server } = await pair();
    const got: Buffer[] = [];
    server.on("data", (b: Buffer) => got.push(b));
    coalesceWrites(client);
    client.write("a");
    coalesceWrites(client); // already corked: no second cork
    client.write("b");
    client.write("c");
    expect(client.writableCorked).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(client.writableCorked).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(Buffer.concat(got).toString()).toBe("abc");
    // Corks again on the next turn.
    coalesceWrites(client);
    expect(client.writableCorked).toBe(1);
  });

  it("ignores a missing or destroyed socket", async () => {
    const { client } = await pair();
    coalesceWrites(undefined);
    client.destroy();
    coalesceWrites(client);
    expect(client.writableCorked).toBe(0);
  });
});

describe("coalesceWrites, lazy", () => {
  it("keeps lazy writes past the turn, flushes them with the next ordinary write, in order", async () => {
    const { client, server } = await pair();
    const got: Buffer[] = [];
    server.on("data", (b: Buffer) => got.push(b));
    coalesceWrites(client, 10_000);
    client.write("m1");
    await new Promise((r) => setImmediate(r));
    expect(client.writableCorked).toBe(1); // still waiting
    coalesceWrites(client, 10_000);
    client.write("m2");
    coalesceWrites(client); // an ordinary frame: everything leaves at the end of this turn
    client.write("s");
    await new Promise((r) => setImmediate(r));
    expect(client.writableCorked).toBe(0);
    await vi.waitFor(() => expect(Buffer.concat(got).toString()).toBe("m1m2s"));
  });

  it("flushes lazy writes after their delay, or at once when enough bytes are queued", async () => {
    const { client, server } = await pair();
    let received = 0;
    server.on("data", (b: Buffer) => (received += b.length));
    coalesceWrites(client, 20);
    client.write("x");
    await vi.waitFor(() => expect(received).toBe(1));
    expect(client.writableCorked).toBe(0);
    coalesceWrites(client, 10_000);
    client.write(Buffer.alloc(64 * 1024));
    coalesceWrites(client, 10_000); // 64 KiB queued: not worth waiting for
    client.write("y");
    await new Promise((r) => setImmediate(r));
    expect(client.writableCorked).toBe(0);
    await vi.waitFor(() => expect(received).toBe(1 + 64 * 1024 + 1));
  });
});
