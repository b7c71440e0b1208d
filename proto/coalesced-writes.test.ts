import { once } from "node:events";
import { createConnection, createServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
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
