// Traffic on a sample of the scale benchmark's sessions, while all of them are live: each
// sampled session connects through the Primary routers with the SDK's SessionClient (as the
// CLI does after openSession), waits for both clusters' upstreams, pings (merged pong: both
// clusters ok), makes an outgoing HTTP request from the Default cluster (agent → east's app)
// and mirrors the app's port; then one request through each cluster's agent traffic port must
// reach every sampled session as a mirrored copy. Mirror, not steal: any number of sessions
// may mirror one port, so sessions sharing the target do not conflict.
import { once } from "node:events";
import type { SessionHandle } from "../../cli/src/sdk/kube/kube-sessions.js";
import { SessionClient, type UpstreamEvent } from "../../cli/src/sdk/session/session-client.js";
import type { IncomingConnection } from "../../cli/src/sdk/session/incoming-traffic.js";
import { sessionKey, sessionUrl } from "../../proto/session-endpoint.js";
import { APP_PORT, type EmbeddedStack } from "../../test/env/stack/embedded-stack.js";
import { round } from "../support/stats-support.js";

export interface SampleOutcome {
  id: string;
  ok: boolean;
  /** The first step that failed, and why. */
  error?: string;
  connectMs?: number;
  pingMs?: number;
  outgoingMs?: number;
  mirrored?: string[];
}

const STEP_TIMEOUT_MS = 15_000;

function within<T>(what: string, p: Promise<T>, ms = STEP_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

function upstreamsUp(c: SessionClient, clusters: string[]): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (clusters.every((n) => c.upstreams.get(n)?.up)) {
        c.off("upstream", on);
        resolve();
      }
    };
    const on = (_: UpstreamEvent) => check();
    c.on("upstream", on);
    check();
  });
}

/** GET through an OutgoingTcpStream from the Default cluster; the whole answer. */
async function outgoingGet(c: SessionClient, host: string, path: string): Promise<string> {
  const s = await c.connectTcp(host, APP_PORT);
  const chunks: Buffer[] = [];
  s.on("data", (d: Buffer) => chunks.push(d));
  s.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  await once(s, "end");
  s.destroy();
  return Buffer.concat(chunks).toString();
}

interface Live {
  h: SessionHandle;
  client: SessionClient;
  outcome: SampleOutcome;
  /** Paths of the requests whose mirrored copy arrived. */
  copies: Set<string>;
}

async function prepare(stack: EmbeddedStack, h: SessionHandle, clusters: string[]): Promise<Live> {
  const client = new SessionClient({
    sessionId: h.id,
    secret: h.secret,
    urls: stack.primaryRouterUrls.map((b) => sessionUrl(b, sessionKey(h.namespace, h.id))),
    pingIntervalMs: 0,
  });
  const live: Live = { h, client, outcome: { id: h.id, ok: false }, copies: new Set() };
  client.on("connection", (conn: IncomingConnection) => {
    let head = "";
    conn.on("data", (d: Buffer) => {
      head += d.toString();
      const path = /^GET (\S+)/.exec(head)?.[1];
      if (path) live.copies.add(path);
    });
    conn.on("error", () => {});
  });
  const step = async <T>(name: string, f: () => Promise<T>): Promise<[T, number]> => {
    const t0 = performance.now();
    try {
      return [await within(name, f()), performance.now() - t0];
    } catch (err) {
      throw new Error(`${name}: ${(err as Error).message}`, { cause: err });
    }
  };
  try {
    return await exercise(stack, live, clusters, step);
  } catch (err) {
    client.close("scale benchmark: sample step failed");
    throw err;
  }
}

async function exercise(
  stack: EmbeddedStack,
  live: Live,
  clusters: string[],
  step: <T>(name: string, f: () => Promise<T>) => Promise<[T, number]>,
): Promise<Live> {
  const { client, h } = live;
  const east = Object.values(stack.workloads)[0]!;
  const [, connectMs] = await step("connect and both upstreams up", async () => {
    await client.connect();
    await upstreamsUp(client, clusters);
  });
  const [pong, pingMs] = await step("ping", () => client.ping());
  const bad = clusters.filter((n) => pong.clusters.find((h) => h.cluster === n)?.state !== "ok");
  if (bad.length > 0) throw new Error(`ping: not ok from ${bad.join(", ")}`);
  const [answer, outgoingMs] = await step("outgoing GET", () =>
    outgoingGet(client, east.ip, `/scale-outgoing-${h.id}`),
  );
  if (!answer.includes(`hello from the ${east.name} app`))
    throw new Error(`outgoing GET: unexpected answer ${JSON.stringify(answer.slice(0, 120))}`);
  await step("mirror subscription", () => client.subscribe(APP_PORT, "mirror"));
  Object.assign(live.outcome, {
    connectMs: round(connectMs, 1),
    pingMs: round(pingMs, 1),
    outgoingMs: round(outgoingMs, 1),
  });
  return live;
}

/** Runs the sample; every client is closed again however it ends. */
export async function sampleTraffic(stack: EmbeddedStack, sample: SessionHandle[]): Promise<SampleOutcome[]> {
  const clusters = Object.keys(stack.workloads);
  const prepared = await Promise.allSettled(sample.map((h) => prepare(stack, h, clusters)));
  const lives: Live[] = [];
  const outcomes: SampleOutcome[] = prepared.map((p, i) => {
    if (p.status === "fulfilled") {
      lives.push(p.value);
      return p.value.outcome;
    }
    return { id: sample[i]!.id, ok: false, error: (p.reason as Error).message };
  });
  try {
    // One request through each cluster's agent: every mirroring session gets a copy of each.
    const paths = Object.values(stack.workloads).map((w) => `/scale-mirror-${w.name}`);
    for (const [i, w] of Object.values(stack.workloads).entries()) {
      const res = await fetch(`${w.trafficUrl}${paths[i]}`);
      const body = await res.text();
      if (!body.includes(`hello from the ${w.name} app`))
        for (const l of lives)
          l.outcome.error ??= `GET via ${w.name}'s agent: answered ${res.status} ${body}`;
    }
    const deadline = Date.now() + STEP_TIMEOUT_MS;
    while (Date.now() < deadline && lives.some((l) => paths.some((p) => !l.copies.has(p))))
      await new Promise((r) => setTimeout(r, 20));
    for (const l of lives) {
      l.outcome.mirrored = paths.filter((p) => l.copies.has(p));
      const missing = paths.filter((p) => !l.copies.has(p));
      if (missing.length > 0) l.outcome.error ??= `no mirrored copy of ${missing.join(", ")}`;
      l.outcome.ok = l.outcome.error === undefined;
    }
  } finally {
    for (const l of lives) l.client.close("scale benchmark done");
  }
  return outcomes;
}
