/* global __ENV, open, console */
// A RouteDiscovery client written elsewhere: k6's gRPC client (grpc-go underneath) loads
// proto/route_discovery.proto itself, authenticates like a router (a ServiceAccount token
// in the `authorization` metadata), ACKs every push, and checks that the table it was sent
// contains SESSION with KEY_HASH. It ends its stream once it has, or after TIMEOUT_MS;
// every check must pass (`checks: rate==1`), so k6 exits non-zero when nothing arrives.
//   k6 run -e ADDRESS=127.0.0.1:9443 -e TOKEN=… -e CA_FILE=ca.pem -e PROTO_DIR=proto \
//     -e SESSION=<namespace>:<name> -e KEY_HASH=… route-discovery-client.k6.js
// Without CA_FILE it dials plaintext (the embedded environment's control planes).
import { Client, Stream } from "k6/net/grpc";
import { check } from "k6";
import { clearTimeout, setTimeout } from "k6/timers";

export const options = {
  vus: 1,
  iterations: 1,
  thresholds: { checks: ["rate==1"] },
};

const client = new Client();
client.load([__ENV.PROTO_DIR], "route_discovery.proto");
const ca = __ENV.CA_FILE ? open(__ENV.CA_FILE) : "";

export default function () {
  client.connect(__ENV.ADDRESS, ca ? { tls: { cacerts: [ca] } } : { plaintext: true });
  const stream = new Stream(client, "switchyard.routes.v1.RouteDiscovery/StreamRoutes", {
    metadata: { authorization: `Bearer ${__ENV.TOKEN}` },
  });
  const table = new Map();
  const responses = [];
  let failure = null;
  let closing = false;
  let reported = false;
  const close = () => {
    if (closing) return;
    closing = true;
    stream.end();
  };

  const report = () => {
    if (reported) return;
    reported = true;
    clearTimeout(timer);
    const route = table.get(__ENV.SESSION);
    check(responses, {
      "a routing table arrived": (r) => r.length > 0,
      "every push has a version and a nonce": (r) => r.every((x) => x.versionInfo && x.nonce),
      "nonces increase": (r) => r.every((x, i) => i === 0 || Number(x.nonce) > Number(r[i - 1].nonce)),
    });
    check(route, {
      "the table holds the session": (x) => x !== undefined,
      "with its client key hash": (x) => x !== undefined && x.clientKeyHash === __ENV.KEY_HASH,
    });
    check(failure, { "the stream ended cleanly": (f) => f === null });
    if (failure !== null) console.error(`stream failed: ${JSON.stringify(failure)}`);
    client.close();
  };

  stream.on("data", (res) => {
    responses.push(res);
    if (res.fullSnapshot) table.clear();
    for (const u of res.upserts || []) table.set(u.sessionId, u);
    for (const id of res.removes || []) table.delete(id);
    if (closing) return;
    // ACK: the next push only comes once this one is acknowledged.
    stream.write({ versionInfo: res.versionInfo, responseNonce: res.nonce });
    if (table.has(__ENV.SESSION)) close();
  });
  stream.on("error", (err) => {
    failure = err;
    report();
  });
  stream.on("end", report);

  stream.write({ routerId: "k6-router", liveSessions: { sessionIds: [] } });
  const timer = setTimeout(close, Number(__ENV.TIMEOUT_MS || 20000));
}
