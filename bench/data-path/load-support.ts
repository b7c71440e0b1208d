// HTTP load and bulk-transfer primitives for the data-path benchmark: paced requests at a
// fixed rate, closed-loop requests at fixed concurrency, and bulk TCP upload to a sink
// (direct or through an HTTP CONNECT proxy). Loopback only; every run is bounded.
import { Agent, request } from "node:http";
import { connect, createServer, type Server, type Socket } from "node:net";

/** One GET; resolves with the latency in ms. Rejects on a non-2xx answer. */
export function get(url: string, agent: Agent): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      res.on("data", () => {});
      res.on("end", () => {
        if ((res.statusCode ?? 0) >= 300) reject(new Error(`GET ${url}: HTTP ${res.statusCode}`));
        else resolve(performance.now() - t0);
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

export const keepAliveAgent = (sockets: number) => new Agent({ keepAlive: true, maxSockets: sockets });

/** `count` requests started every 1000/rate ms regardless of answers (open loop). */
export async function paced(url: string, rate: number, count: number): Promise<number[]> {
  const agent = keepAliveAgent(64);
  const out: Promise<number>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    out.push(get(url, agent));
  }
  const lat = await Promise.all(out);
  agent.destroy();
  return lat;
}

/** `count` requests over `concurrency` keep-alive connections (closed loop): latencies and req/s. */
export async function closedLoop(url: string, concurrency: number, count: number) {
  const agent = keepAliveAgent(concurrency);
  const lat: number[] = [];
  let started = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < count) {
        started++;
        lat.push(await get(url, agent));
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  return { latencies: lat, reqPerSec: count / seconds };
}

/** A TCP sink: counts bytes and answers one byte once `expect` bytes arrived on a connection. */
export async function startSink(host: string, expect: number): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => {
    let got = 0;
    s.on("data", (b: Buffer) => {
      got += b.length;
      if (got >= expect) s.end("k");
    });
    s.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, port: (server.address() as { port: number }).port };
}

/** Opens a tunnel through an HTTP CONNECT proxy (`http://host:port`). */
export function connectVia(proxy: string, host: string, port: number): Promise<Socket> {
  const p = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = request({ host: p.hostname, port: p.port, method: "CONNECT", path: `${host}:${port}` });
    req.on("connect", (res, socket) => {
      if (res.statusCode !== 200)
        reject(new Error(`CONNECT ${host}:${port} via ${proxy}: HTTP ${res.statusCode}`));
      else resolve(socket);
    });
    req.on("error", reject);
    req.end();
  });
}

export function directSocket(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port }, () => resolve(s));
    s.on("error", reject);
  });
}

/** Writes `bytes` in 64 KiB chunks (respecting back-pressure) and waits for the sink's byte; MiB/s. */
export async function upload(socket: Socket, bytes: number): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024, 7);
  const t0 = performance.now();
  const acked = new Promise<void>((resolve, reject) => {
    socket.once("data", () => resolve());
    socket.once("error", reject);
    socket.once("close", () => reject(new Error("closed before the sink acknowledged")));
  });
  for (let sent = 0; sent < bytes; sent += chunk.length) {
    if (!socket.write(chunk)) await new Promise((r) => socket.once("drain", r));
  }
  await acked;
  const mibps = bytes / 1024 / 1024 / ((performance.now() - t0) / 1000);
  socket.destroy();
  return mibps;
}
