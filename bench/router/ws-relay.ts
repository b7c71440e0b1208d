// The benchmark's baseline for one extra hop: a WebSocket relay with no logic. Each client
// connection gets one upstream connection; messages are forwarded both ways as-is.
//   tsx bench/router/ws-relay.ts --upstream ws://127.0.0.1:P/v1/sessions/x --secret s
// Prints {"port":N} once listening.
import { Command } from "commander";
import WebSocket, { WebSocketServer } from "ws";

const o = new Command("ws-relay")
  .requiredOption("--upstream <url>")
  .requiredOption("--secret <secret>")
  .option("--port <n>", "listen port", "0")
  .parse()
  .opts<{ upstream: string; secret: string; port: string }>();

const wss = new WebSocketServer({
  host: "127.0.0.1",
  port: Number(o.port),
  perMessageDeflate: false,
  skipUTF8Validation: true,
  maxPayload: 8 << 20,
});
wss.on("connection", (client) => {
  const up = new WebSocket(o.upstream, {
    headers: { authorization: `Bearer ${o.secret}` },
    perMessageDeflate: false,
    skipUTF8Validation: true,
  });
  const pending: Buffer[] = [];
  client.on("message", (d: Buffer) => (up.readyState === WebSocket.OPEN ? up.send(d) : pending.push(d)));
  up.on("open", () => {
    for (const d of pending.splice(0)) up.send(d);
  });
  up.on("message", (d: Buffer) => client.send(d));
  up.on("close", () => client.close());
  client.on("close", () => up.close());
  up.on("error", () => client.terminate());
  client.on("error", () => up.terminate());
});
wss.on("listening", () => {
  const addr = wss.address();
  process.stdout.write(
    JSON.stringify({ port: typeof addr === "string" || addr === null ? 0 : addr.port }) + "\n",
  );
});
process.once("SIGTERM", () => process.exit(0));
