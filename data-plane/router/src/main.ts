// The router process: parses flags/env, builds the RouterServer, feeds its routing table
// from the control plane (RouteDiscovery) and/or a static routes file, and runs until
// SIGTERM/SIGINT. Every flag has an environment variable (SWITCHYARD_ROUTER_<FLAG>).
import { STOP_DEADLINE_MS, StopDeadline } from "../../../lib/stop-deadline.js";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { Command, Option } from "commander";
import { pino } from "pino";
import { OptionError } from "../../../lib/option-error.js";
import { RouteDiscoveryClient } from "./route-discovery-client.js";
import { RouterServer } from "./router-server.js";
import { loadStaticRoutes } from "./static-routes.js";

interface Flags {
  listen: string;
  adminListen: string;
  routesFile?: string;
  controlPlane?: string;
  tokenFile?: string;
  controlPlaneCa?: string;
  clientCert?: string;
  clientKey?: string;
  controlPlanePlaintext?: boolean;
  routerId: string;
  tlsCert?: string;
  tlsKey?: string;
  logLevel: string;
  maxPayloadBytes: string;
  highWaterBytes: string;
  hardLimitBytes: string;
  wsPingIntervalMs: string;
  mergeTimeoutMs: string;
  upstreamUnmasked?: boolean;
  upstreamMux?: boolean;
}

const env = (name: string) => `SWITCHYARD_ROUTER_${name}`;

function intFlag(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new OptionError(`--${name}`, `must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** host:port (an empty host: every interface), e.g. `0.0.0.0:8080`, `:9091`, `[::1]:0`. */
function parseListen(flag: string, raw: string, example: string): { host: string; port: number } {
  const i = raw.lastIndexOf(":");
  const port = Number(raw.slice(i + 1));
  if (i < 0 || raw.slice(i + 1) === "" || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new OptionError(flag, `must be host:port (e.g. ${example}), got ${JSON.stringify(raw)}`);
  return { host: raw.slice(0, i).replace(/^\[|\]$/g, "") || "0.0.0.0", port };
}

async function main(): Promise<void> {
  const program = new Command("switchyard-router")
    .description("Switchyard router: fans session frames out to upstreams and merges the answers")
    .addOption(
      new Option("--listen <host:port>", "session port: /v1/sessions/{id}, /healthz, /readyz")
        .env(env("LISTEN"))
        .default("0.0.0.0:8080"),
    )
    .addOption(
      new Option(
        "--admin-listen <host:port>",
        "admin port, plain HTTP: /metrics, /healthz, /readyz, /debug/routes, /debug/memory (session ids, upstream and pod addresses: keep it off the public network)",
      )
        .env(env("ADMIN_LISTEN"))
        .default("127.0.0.1:9091"),
    )
    .addOption(
      new Option(
        "--routes-file <path>",
        "static routing table (JSON/YAML list of SessionRoute); reloaded on SIGHUP",
      ).env(env("ROUTES_FILE")),
    )
    .addOption(
      new Option("--control-plane <url>", "RouteDiscovery URL of the control plane (https://…)").env(
        env("CONTROL_PLANE"),
      ),
    )
    .addOption(
      new Option("--token-file <path>", "ServiceAccount token presented to the control plane").env(
        env("TOKEN_FILE"),
      ),
    )
    .addOption(
      new Option("--control-plane-ca <path>", "CA bundle verifying the control plane").env(
        env("CONTROL_PLANE_CA"),
      ),
    )
    .addOption(
      new Option("--client-cert <path>", "client certificate for mTLS to the control plane").env(
        env("CLIENT_CERT"),
      ),
    )
    .addOption(
      new Option("--client-key <path>", "client key for mTLS to the control plane").env(env("CLIENT_KEY")),
    )
    .addOption(
      new Option(
        "--control-plane-plaintext",
        "allow http:// to the control plane (embedded environment only)",
      ).env(env("CONTROL_PLANE_PLAINTEXT")),
    )
    .addOption(
      new Option("--router-id <id>", "stable router id (pod name)")
        .env(env("ID"))
        .default(process.env.POD_NAME ?? hostname()),
    )
    .addOption(new Option("--tls-cert <path>", "serve wss:// with this certificate").env(env("TLS_CERT")))
    .addOption(new Option("--tls-key <path>", "key of --tls-cert").env(env("TLS_KEY")))
    .addOption(new Option("--log-level <level>", "pino log level").env(env("LOG_LEVEL")).default("info"))
    .addOption(
      new Option("--max-payload-bytes <n>", "largest frame payload")
        .env(env("MAX_PAYLOAD_BYTES"))
        .default("1048576"),
    )
    .addOption(
      new Option("--high-water-bytes <n>", "queued bytes toward a peer that pause its source")
        .env(env("HIGH_WATER_BYTES"))
        .default("1048576"),
    )
    .addOption(
      new Option("--hard-limit-bytes <n>", "queued bytes after which a peer is dropped as too slow")
        .env(env("HARD_LIMIT_BYTES"))
        .default("8388608"),
    )
    .addOption(
      new Option(
        "--ws-ping-interval-ms <n>",
        "WebSocket ping interval on every socket; a peer silent for two intervals while read is dropped",
      )
        .env(env("WS_PING_INTERVAL_MS"))
        .default("30000"),
    )
    .addOption(
      new Option("--merge-timeout-ms <n>", "how long a broadcast waits for every upstream")
        .env(env("MERGE_TIMEOUT_MS"))
        .default("10000"),
    )
    .addOption(
      new Option(
        "--upstream-unmasked",
        "send unmasked frames upstream (trusted networks only; saves a copy per frame)",
      ).env(env("UPSTREAM_UNMASKED")),
    )
    .addOption(
      new Option(
        "--no-upstream-mux",
        "dial every session's gateway upstream on a WebSocket of its own instead of one shared connection per gateway",
      ),
    );
  program.parse();
  const f = program.opts<Flags>();

  const log = pino({ level: f.logLevel, base: { component: "router", routerId: f.routerId } });
  if (!f.routesFile && !f.controlPlane)
    throw new OptionError(
      "--control-plane",
      "give --control-plane (RouteDiscovery) or --routes-file (static table), or both",
    );
  if ((f.tlsCert === undefined) !== (f.tlsKey === undefined))
    throw new OptionError("--tls-cert", "--tls-cert and --tls-key go together");

  const highWater = intFlag("high-water-bytes", f.highWaterBytes);
  const { host, port } = parseListen("--listen", f.listen, "0.0.0.0:8080");
  const admin = parseListen("--admin-listen", f.adminListen, "127.0.0.1:9091");
  const router = new RouterServer({
    host,
    port,
    admin,
    logger: log,
    ...(f.tlsCert && f.tlsKey
      ? { tls: { certPem: readFileSync(f.tlsCert, "utf8"), keyPem: readFileSync(f.tlsKey, "utf8") } }
      : {}),
    limits: {
      maxPayloadBytes: intFlag("max-payload-bytes", f.maxPayloadBytes),
      flow: {
        highWaterBytes: highWater,
        lowWaterBytes: Math.floor(highWater / 4),
        hardLimitBytes: intFlag("hard-limit-bytes", f.hardLimitBytes),
      },
      wsPingIntervalMs: intFlag("ws-ping-interval-ms", f.wsPingIntervalMs),
      mergeTimeoutMs: intFlag("merge-timeout-ms", f.mergeTimeoutMs),
      unmasked: f.upstreamUnmasked === true,
    },
    upstreamMux: f.upstreamMux !== false && process.env[env("UPSTREAM_MUX")] !== "false",
  });

  const abort = new AbortController();
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => abort.abort());

  if (f.routesFile) {
    const file = f.routesFile;
    const reload = async () => {
      try {
        const delta = await loadStaticRoutes(file);
        router.table.apply(delta);
        log.info({ version: delta.version, sessions: router.table.size }, "static routes applied");
      } catch (err) {
        // Keep serving the last good table.
        log.error({ err: (err as Error).message, file }, "static routes rejected");
        if (!router.table.loaded) throw err;
      }
    };
    await reload();
    process.on("SIGHUP", () => void reload().catch(() => {}));
  }

  // Gone before the kubelet's SIGKILL (the chart's 30 s grace), saying what hung.
  const stopping = new StopDeadline();
  stopping.arm(abort.signal, STOP_DEADLINE_MS, (pending) => {
    log.error(
      { pending, deadlineMs: STOP_DEADLINE_MS },
      "parts still stopping at the deadline; exiting without them",
    );
    process.exit(1);
  });
  const parts: Promise<void>[] = [stopping.track("session server", router.start(abort.signal))];
  if (f.controlPlane) {
    const token = f.tokenFile;
    const ca = f.controlPlaneCa ? readFileSync(f.controlPlaneCa, "utf8") : undefined;
    const discovery = new RouteDiscoveryClient({
      url: f.controlPlane,
      routerId: f.routerId,
      sink: router.table,
      liveSessions: () => router.sessions.liveSessionIds(),
      onRejected: () => router.metrics.event("routes_rejected"),
      credentials: {
        ...(token ? { token: () => readFileSync(token, "utf8").trim() } : {}),
        ...(ca
          ? {
              tls: {
                ca,
                ...(f.clientCert && f.clientKey
                  ? { cert: readFileSync(f.clientCert, "utf8"), key: readFileSync(f.clientKey, "utf8") }
                  : {}),
              },
            }
          : {}),
        ...(f.controlPlanePlaintext ? { plaintext: true } : {}),
      },
      logger: log,
    });
    router.sessions.onLiveSessionsChanged(() => discovery.liveSessionsChanged());
    parts.push(stopping.track("RouteDiscovery client", discovery.start(abort.signal)));
  }
  await Promise.all(parts);
  log.info("router stopped");
}

main().catch((err: unknown) => {
  const e = err as Error & { code?: string };
  process.stderr.write(`switchyard-router: ${e.code ? `${e.code}: ` : ""}${e.message}\n`);
  process.exit(2);
});
