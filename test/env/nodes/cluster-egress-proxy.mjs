/* global process, console */
// The cluster side of a node's API-server egress (test/env/nodes/cluster-egress.ts): an HTTP
// CONNECT proxy over mutual TLS, run inside the node's network namespace as a konnectivity agent
// runs in a cluster. The API server's "cluster" egress (webhooks, aggregated APIs, kubelets)
// reaches Service IPs and pods through it, by the node's own routes and kube-proxy's rules.
// Only a client certificate of the cluster's CA whose subject is CLIENT_NAME opens a tunnel.
//   LISTEN=<ip>:<port> TLS_CERT=… TLS_KEY=… CLIENT_CA=… CLIENT_NAME=… node cluster-egress-proxy.mjs
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { connect } from "node:net";

const [host, port] = process.env.LISTEN.split(":");
const server = createServer(
  {
    cert: readFileSync(process.env.TLS_CERT),
    key: readFileSync(process.env.TLS_KEY),
    ca: readFileSync(process.env.CLIENT_CA),
    requestCert: true,
    rejectUnauthorized: true,
  },
  (req, res) => res.writeHead(405, { "content-type": "text/plain" }).end("CONNECT only\n"),
);
server.on("connect", (req, client, head) => {
  const refuse = (status, why) => {
    client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${why}\n`);
  };
  client.on("error", () => {});
  const peer = client.getPeerCertificate?.();
  if (peer?.subject?.CN !== process.env.CLIENT_NAME)
    return refuse("403 Forbidden", `only ${process.env.CLIENT_NAME} may tunnel through this node`);
  const target = /^\[?([^\]]+)\]?:(\d+)$/.exec(req.url ?? "");
  if (!target) return refuse("400 Bad Request", `CONNECT needs host:port, got ${req.url}`);
  const upstream = connect({ host: target[1], port: Number(target[2]) });
  upstream.setNoDelay(true);
  upstream.once("connect", () => {
    client.write("HTTP/1.1 200 Connection established\r\n\r\n");
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  let established = false;
  upstream.once("connect", () => (established = true));
  upstream.on("error", (err) => {
    console.log(`CONNECT ${req.url}: ${err.message}`);
    // Before the tunnel stands, the API server is told why; after, the tunnel just closes.
    if (!established) refuse("502 Bad Gateway", `${req.url}: ${err.message}`);
    else client.destroy();
  });
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => {
    if (established) client.destroy();
  });
});
server.on("tlsClientError", () => {});
server.listen(Number(port), host, () => console.log(`cluster egress proxy listening on ${host}:${port}`));
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
