// The agent process: parses flags (each also an environment variable
// SWITCHYARD_AGENT_<FLAG>), builds the AgentServer for one target and runs until
// SIGTERM/SIGINT. As a sidecar it serves its target's env and files from the pod itself
// (--target-env-prefix, --target-root, --target-mount: what the sidecar template copies
// into the agent container) and makes no API call for them; as a local process it reads
// them through the API (--pod and --kubeconfig). Target ports: `--app-port 8080` (agent
// accepts on 8080 and forwards to the app on 8080 of --app-host: sidecar with redirected
// traffic or an app on another host) or `--app-port 8080:18080` (subscriptions name 8080,
// the app listens on 8080, the agent accepts that port's traffic on 18080: process mode
// beside a local app).
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import type { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { OptionError } from "../../../lib/option-error.js";
import { AgentServer, type TargetPort } from "./agent-server.js";
import { PodEnv } from "./target/pod-env.js";
import { PodFiles } from "./target/pod-files.js";
import { SessionSecrets } from "./session-secrets.js";
import { TargetView, type PodSources, type TargetRef } from "./target/target-view.js";

interface Flags {
  listen: string;
  appPort: string[];
  probePort: string[];
  appHost: string;
  trafficHost?: string;
  kubeconfig?: string;
  pod?: string;
  container?: string;
  sharedVolume: string[];
  targetEnvPrefix?: string;
  targetRoot?: string;
  targetMount: string[];
  outboundBind?: string;
  secretHash: string[];
  secretsFile?: string;
  metricsListen?: string;
  pingTimeoutMs: string;
  resumeGraceMs: string;
  stateFile?: string;
  logLevel: string;
  tlsCert?: string;
  tlsKey?: string;
}

const env = (name: string) => `SWITCHYARD_AGENT_${name}`;
const collect = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
];

/** One path per flag: a mount path may contain a comma, so only newlines separate (env var). */
const collectPaths = (value: string, previous: string[] = []) => [
  ...previous,
  ...value.split("\n").filter((s) => s.trim() !== ""),
];

/** Sidecar mode: the parts of the target served from the pod itself (each given flag turns one on). */
function podSources(f: Flags): PodSources {
  if (f.targetMount.length > 0 && f.targetRoot === undefined)
    throw new OptionError(
      "--target-mount",
      "needs --target-root (where the agent container mounts the target's volumes)",
    );
  return {
    ...(f.targetEnvPrefix !== undefined ? { env: new PodEnv(f.targetEnvPrefix) } : {}),
    ...(f.targetRoot !== undefined ? { files: new PodFiles(f.targetRoot, f.targetMount) } : {}),
  };
}

function parseHostPort(flag: string, raw: string): { host: string; port: number } {
  const i = raw.lastIndexOf(":");
  const port = Number(raw.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new OptionError(`--${flag}`, `must be host:port (e.g. 0.0.0.0:9440), got ${JSON.stringify(raw)}`);
  return { host: raw.slice(0, i).replace(/^\[|\]$/g, "") || "0.0.0.0", port };
}

/** `8080` or `8080:18080` (app port : agent's listening port). */
function parseAppPort(raw: string): TargetPort {
  const m = /^(\d{1,5})(?::(\d{1,5}))?$/.exec(raw);
  const app = Number(m?.[1]);
  const listen = m?.[2] === undefined ? app : Number(m[2]);
  if (!m || app < 1 || app > 65535 || listen > 65535)
    throw new OptionError(
      "--app-port",
      `must be PORT or APP_PORT:LISTEN_PORT (e.g. 8080 or 8080:18080), got ${JSON.stringify(raw)}`,
    );
  return { appPort: app, listenPort: listen };
}

/** `8080:15102` (app port : relay port), both given. */
function parseProbePort(raw: string): TargetPort {
  const m = /^(\d{1,5}):(\d{1,5})$/.exec(raw);
  const app = Number(m?.[1]);
  const listen = Number(m?.[2]);
  if (!m || app < 1 || app > 65535 || listen < 1 || listen > 65535)
    throw new OptionError(
      "--probe-port",
      `must be APP_PORT:RELAY_PORT (e.g. 8080:15102), got ${JSON.stringify(raw)}`,
    );
  return { appPort: app, listenPort: listen };
}

function targetRef(f: Flags): TargetRef | undefined {
  const raw =
    f.pod ??
    (process.env.POD_NAMESPACE && process.env.POD_NAME
      ? `${process.env.POD_NAMESPACE}/${process.env.POD_NAME}`
      : undefined);
  if (!raw) return undefined;
  const [namespace, name, extra] = raw.split("/");
  if (!namespace || !name || extra !== undefined)
    throw new OptionError("--pod", `must be namespace/name, got ${JSON.stringify(raw)}`);
  const shared = new Map<string, string>();
  for (const s of f.sharedVolume) {
    const [vol, path] = s.split("=");
    if (!vol || !path)
      throw new OptionError("--shared-volume", `must be VOLUME=PATH, got ${JSON.stringify(s)}`);
    shared.set(vol, path);
  }
  return {
    namespace,
    name,
    ...(f.container ? { container: f.container } : {}),
    ...(shared.size ? { sharedVolumes: shared } : {}),
  };
}

/**
 * The API client is loaded only when the agent reads its target through the API (process mode):
 * a sidecar never does, and @kubernetes/client-node costs it about 400 ms of start-up and 80 MiB.
 */
async function apiSources(f: Flags) {
  const [{ KubeConfig: Config }, { ApiSources }] = await Promise.all([
    import("@kubernetes/client-node"),
    import("./target/api-sources.js"),
  ]);
  return new ApiSources(kubeConfig(f, new Config()));
}

function kubeConfig(f: Flags, kc: KubeConfig): KubeConfig {
  if (f.kubeconfig) kc.loadFromFile(f.kubeconfig);
  else if (process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}

async function main(): Promise<void> {
  const program = new Command("switchyard-agent")
    .description("Switchyard agent: serves one target's env, files, network and ports to sessions")
    .addOption(
      new Option("--listen <host:port>", "protocol endpoint (routers dial /v1/sessions/{id})")
        .env(env("LISTEN"))
        .default("0.0.0.0:9440"),
    )
    .addOption(
      new Option(
        "--app-port <ports>",
        "target port(s): PORT or APP_PORT:LISTEN_PORT; repeat or comma-separate",
      )
        .env(env("APP_PORT"))
        .argParser(collect)
        .default([]),
    )
    .addOption(
      new Option(
        "--probe-port <ports>",
        "APP_PORT:RELAY_PORT: a port that always forwards to the app, for the kubelet's probes; repeat or comma-separate",
      )
        .env(env("PROBE_PORT"))
        .argParser(collect)
        .default([]),
    )
    .addOption(
      new Option("--app-host <host>", "where the app listens").env(env("APP_HOST")).default("127.0.0.1"),
    )
    .addOption(
      new Option(
        "--traffic-host <host>",
        "address the target ports are accepted on (default: the --listen host)",
      ).env(env("TRAFFIC_HOST")),
    )
    .addOption(
      new Option(
        "--kubeconfig <path>",
        "kubeconfig (default: in-cluster ServiceAccount, else the default kubeconfig)",
      ).env(env("KUBECONFIG")),
    )
    .addOption(
      new Option("--pod <namespace/name>", "the target pod (default POD_NAMESPACE/POD_NAME)").env(env("POD")),
    )
    .addOption(
      new Option("--container <name>", "the target container (default: the pod's first)").env(
        env("CONTAINER"),
      ),
    )
    .addOption(
      new Option(
        "--shared-volume <volume=path>",
        "sidecar: a volume shared with the target, mounted in the agent at path; repeatable",
      )
        .env(env("SHARED_VOLUME"))
        .argParser(collect)
        .default([]),
    )
    .addOption(
      new Option(
        "--target-env-prefix <prefix>",
        "sidecar: serve the target's env from this process's variables with this prefix (stripped), plus its service-link variables; no API call",
      ).env(env("TARGET_ENV_PREFIX")),
    )
    .addOption(
      new Option(
        "--target-root <path>",
        "sidecar: serve the target's files from its volumes mounted at <path><mount path>; no API call",
      ).env(env("TARGET_ROOT")),
    )
    .addOption(
      new Option(
        "--target-mount <path>",
        "sidecar: a mount path of the target container, mounted below --target-root; repeatable (newline-separated in the env var)",
      )
        .env(env("TARGET_MOUNT"))
        .argParser(collectPaths)
        .default([]),
    )
    .addOption(
      new Option("--outbound-bind <ip>", "local address outgoing TCP/UDP sockets bind to").env(
        env("OUTBOUND_BIND"),
      ),
    )
    .addOption(
      new Option("--secret-hash <sha256>", "sha256 (hex) of a secret accepted for every session; repeatable")
        .env(env("SECRET_HASH"))
        .argParser(collect)
        .default([]),
    )
    .addOption(
      new Option(
        "--secrets-file <path>",
        "JSON/YAML file of per-session secret hashes and DB branches (re-read on change)",
      ).env(env("SECRETS_FILE")),
    )
    .addOption(
      new Option("--metrics-listen <host:port>", "serve /metrics and /healthz here too").env(
        env("METRICS_LISTEN"),
      ),
    )
    .addOption(
      new Option(
        "--ping-timeout-ms <n>",
        "drop a session after this long without a frame (protocol pings included) while reading it",
      )
        .env(env("PING_TIMEOUT_MS"))
        .default("60000"),
    )
    .addOption(
      new Option(
        "--resume-grace-ms <n>",
        "when a session's connection is lost, hold its traffic this long for it to reconnect (0: send it to the app at once)",
      )
        .env(env("RESUME_GRACE_MS"))
        .default("10000"),
    )
    .addOption(
      new Option(
        "--state-file <path>",
        "keep the subscriptions here; a restarted agent reloads them held (--resume-grace-ms) before it accepts traffic",
      ).env(env("STATE_FILE")),
    )
    .addOption(new Option("--log-level <level>", "pino log level").env(env("LOG_LEVEL")).default("info"))
    .addOption(new Option("--tls-cert <path>", "serve wss:// with this certificate").env(env("TLS_CERT")))
    .addOption(new Option("--tls-key <path>", "key of --tls-cert").env(env("TLS_KEY")));
  program.parse();
  const f = program.opts<Flags>();
  const log = pino({ level: f.logLevel, base: { component: "agent" } });

  const ports = f.appPort.map(parseAppPort);
  const probePorts = f.probePort.map(parseProbePort);
  if (ports.length === 0)
    log.warn("no --app-port: the agent owns no target port, so subscriptions will be refused");
  if ((f.tlsCert === undefined) !== (f.tlsKey === undefined))
    throw new OptionError("--tls-cert", "goes together with --tls-key: give both or neither");
  const pingTimeoutMs = Number(f.pingTimeoutMs);
  if (!Number.isInteger(pingTimeoutMs) || pingTimeoutMs <= 0)
    throw new OptionError("--ping-timeout-ms", `must be a positive integer, got ${f.pingTimeoutMs}`);

  const resumeGraceMs = Number(f.resumeGraceMs);
  if (!Number.isInteger(resumeGraceMs) || resumeGraceMs < 0)
    throw new OptionError("--resume-grace-ms", `must be 0 or a positive integer, got ${f.resumeGraceMs}`);

  const secrets = new SessionSecrets({
    secretHashes: f.secretHash,
    ...(f.secretsFile ? { secretsFile: f.secretsFile } : {}),
    onFileError: (err) =>
      log.error({ err: err.message }, "secrets file rejected; keeping the last good content"),
  });
  await secrets.load();
  const ref = targetRef(f);
  const fromPod = podSources(f);
  // A sidecar given both parts makes no API call at all (its ServiceAccount is the app's).
  const needsApi = ref !== undefined && !(fromPod.env && fromPod.files);
  const view = new TargetView(needsApi ? await apiSources(f) : undefined, ref, undefined, fromPod);
  const { host, port } = parseHostPort("listen", f.listen);
  const server = new AgentServer({
    host,
    port,
    secrets,
    view,
    ports: ports.map((p) => ({
      ...p,
      appHost: f.appHost,
      ...(f.trafficHost ? { listenHost: f.trafficHost } : {}),
    })),
    probePorts: probePorts.map((p) => ({
      ...p,
      appHost: f.appHost,
      ...(f.trafficHost ? { listenHost: f.trafficHost } : {}),
    })),
    outgoing: f.outboundBind ? { bindAddress: f.outboundBind } : {},
    pingTimeoutMs,
    resumeGraceMs,
    ...(f.stateFile ? { stateFile: f.stateFile } : {}),
    logger: log,
    ...(f.tlsCert && f.tlsKey
      ? { tls: { certPem: readFileSync(f.tlsCert, "utf8"), keyPem: readFileSync(f.tlsKey, "utf8") } }
      : {}),
  });

  const abort = new AbortController();
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.once(sig, () => abort.abort());
  if (f.metricsListen) {
    const m = parseHostPort("metrics-listen", f.metricsListen);
    const metricsServer = createServer((req, res) => void server.http(req, res));
    await new Promise<void>((resolve, reject) => {
      metricsServer.once("error", reject);
      metricsServer.listen(m.port, m.host, () => resolve());
    });
    abort.signal.addEventListener("abort", () => metricsServer.close(), { once: true });
  }
  log.info(
    {
      pod: ref ? `${ref.namespace}/${ref.name}` : undefined,
      env: fromPod.env ? "pod" : ref ? "api" : "none",
      files: fromPod.files ? "pod" : ref ? "api" : "none",
      ports,
      probePorts,
      outboundBind: f.outboundBind,
    },
    "agent starting",
  );
  await server.start(abort.signal);
  log.info("agent stopped");
}

main().catch((err: unknown) => {
  const e = err as Error & { code?: string };
  process.stderr.write(`switchyard-agent: ${e.code ? `${e.code}: ` : ""}${e.message}\n`);
  process.exit(2);
});
