// `switchyard exec --network=transparent` against `--network=proxy`, on real pods (the pod
// stack, east the Default cluster): a TCP server pod behind a NodePort Service in east
// (fixtures/transparent-server.mjs) and one client (fixtures/transparent-client.mjs) run three
// ways, taking turns, `runs` times each:
//   - direct: the client on this machine to the Service's NodePort on east's node (kube-proxy
//     → the pod), a reference only;
//   - proxy: `switchyard exec --network=proxy -- node client.mjs`, the client speaking SOCKS5
//     to $ALL_PROXY (the CLI's SOCKS5 server → session → east's agent → the ClusterIP);
//   - transparent: `switchyard exec --network=transparent -- node client.mjs` connecting
//     straight to the ClusterIP (TUN → tun2socks → the namespace's SOCKS5 server → the
//     Unix-socket bridge → the CLI → session → east's agent).
// Each run: 200 sequential connect + 1-byte request/response exchanges (p50/p99), then one
// download of `mib` MiB over one connection (MiB/s). Medians of the runs are compared.
// Numbers only; nothing here asserts speed. Needs root and the node packages, like `-- pods`,
// and for the transparent arm /dev/net/tun open to all and tun2socks (`npm run binaries`).
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { cpus } from "node:os";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { PRODUCT_IMAGE } from "../../test/env/images/project-images.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { launch, tsx } from "../../test/support/launch.js";
import { eventually } from "../../test/support/poll.js";
import { adminKc, waitQuiet } from "../chaos/chaos-stack.js";
import { cpuDelta, cpuSnapshot } from "../support/cpu-support.js";
import { onPodStack, requireWholeNumbers } from "../support/pod-stack-run.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, writeResult } from "../support/stats-support.js";

export interface TransparentBenchOptions {
  /** Runs of each arm (the arms take turns). */
  runs: number;
  /** MiB downloaded per bulk measurement. */
  mib: number;
}

export const defaultTransparentBench: TransparentBenchOptions = { runs: 3, mib: 64 };

/** Goals (bench/data-path/README.md says where each comes from). */
const GOAL_BULK_RATIO = 0.8;
const GOAL_CONNECT_ADDED_MS = 1;

const CONNECTS = 200;
const NAME = "bench-transparent";
const SERVER_PORT = 9000;
const FIXTURES = join(import.meta.dirname, "..", "fixtures");
const CLIENT = join(FIXTURES, "transparent-client.mjs");
/** One client run: start-up (exec: session, injection, rollout) and the measurements. */
const RUN_TIMEOUT_MS = 600_000;

const ARMS = ["direct", "proxy", "transparent"] as const;
type Arm = (typeof ARMS)[number];

interface Destination {
  clusterIp: string;
  nodeIp: string;
  nodePort: number;
}

/** What the client prints. */
interface ClientResult {
  connectMs: number[];
  bulk: { bytes: number; ms: number; mibPerS: number };
  allProxy: string | null;
  /** Added by the bench: the busiest processes during each phase. */
  cpu?: Record<"connect" | "bulk", ReturnType<typeof cpuDelta>>;
}

/** The server pod (product image: it has node; the script from a ConfigMap) and its NodePort Service in east. */
async function startDestination(kc: KubeConfig, nodeIp: string): Promise<Destination> {
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = "default";
  await core.createNamespacedConfigMap({
    namespace,
    body: {
      metadata: { name: NAME },
      data: { "server.mjs": readFileSync(join(FIXTURES, "transparent-server.mjs"), "utf8") },
    },
  });
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: NAME, labels: { app: NAME } },
      spec: {
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: "server",
            image: PRODUCT_IMAGE,
            imagePullPolicy: "Never",
            command: ["node", "/bench/server.mjs"],
            env: [{ name: "PORT", value: String(SERVER_PORT) }],
            ports: [{ containerPort: SERVER_PORT, protocol: "TCP" }],
            readinessProbe: { tcpSocket: { port: SERVER_PORT }, periodSeconds: 1 },
            volumeMounts: [{ name: "script", mountPath: "/bench", readOnly: true }],
            securityContext: {
              runAsNonRoot: true,
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              capabilities: { drop: ["ALL"] },
            },
          },
        ],
        volumes: [{ name: "script", configMap: { name: NAME } }],
      },
    },
  });
  const svc = await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name: NAME },
      spec: {
        type: "NodePort",
        selector: { app: NAME },
        ports: [{ port: SERVER_PORT, targetPort: SERVER_PORT, protocol: "TCP" }],
      },
    },
  });
  await eventually(
    `the ${NAME} pod in east to be Ready`,
    async () =>
      (await core.readNamespacedPod({ namespace, name: NAME })).status?.conditions?.some(
        (c) => c.type === "Ready" && c.status === "True",
      ),
    { timeoutMs: 120_000, intervalMs: 200 },
  );
  const clusterIp = svc.spec?.clusterIP;
  const nodePort = svc.spec?.ports?.[0]?.nodePort;
  if (!clusterIp || !nodePort)
    throw new Error(`Service ${NAME} has no clusterIP or nodePort: ${JSON.stringify(svc.spec)}`);
  // kube-proxy programs the Service's rules (NodePort and ClusterIP alike) after the pod is Ready.
  await eventually(
    `the ${NAME} Service to answer at ${nodeIp}:${nodePort}`,
    () => answers(nodeIp, nodePort),
    {
      timeoutMs: 60_000,
      intervalMs: 200,
    },
  );
  return { clusterIp, nodeIp, nodePort };
}

/** One "P" exchange with the server at host:port answered. */
function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port, timeout: 2000 }, () => s.write("P"));
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.once("data", (b) => done(b.toString() === "p"));
    s.once("timeout", () => done(false));
    s.once("error", () => done(false));
    s.once("end", () => done(false));
  });
}

/** One run of the client in `arm`; its JSON line. */
async function runClient(stack: PodStack, arm: Arm, dest: Destination, mib: number): Promise<ClientResult> {
  const viaExec = arm !== "direct";
  const config = JSON.stringify({
    host: viaExec ? dest.clusterIp : dest.nodeIp,
    port: viaExec ? SERVER_PORT : dest.nodePort,
    mib,
    connects: CONNECTS,
    socks: arm === "proxy",
  });
  const command = viaExec
    ? tsx("cli/src/main.ts", [
        "exec",
        ...stack.developerCliArgs,
        `--network=${arm}`,
        "--",
        process.execPath,
        CLIENT,
        config,
      ])
    : { command: process.execPath, args: [CLIENT, config] };
  const proc = await launch({ name: viaExec ? `switchyard-exec-${arm}` : "bench-client-direct", ...command });
  // CPU times of every process under this one (CLI, helper, tun2socks, client, clusters and
  // nodes; not the pods' containers, which containerd-shim parents) when the client starts each
  // phase and when it prints its result.
  const marks: ReturnType<typeof cpuSnapshot>[] = [];
  const watching = (async () => {
    for (const mark of ["phase connect\n", "phase bulk\n", "\n{"]) {
      await eventually(`the client's ${JSON.stringify(mark)}`, () => proc.stdout().includes(mark), {
        timeoutMs: RUN_TIMEOUT_MS,
        intervalMs: 10,
        giveUp: () => (proc.hasExited() ? new Error("the client exited") : undefined),
      });
      marks.push(cpuSnapshot());
    }
  })();
  watching.catch(() => {});
  try {
    const status = await Promise.race([
      proc.exited,
      new Promise<string>((resolve) => setTimeout(() => resolve("timeout"), RUN_TIMEOUT_MS).unref()),
    ]);
    await watching.catch(() => {});
    if (status !== 0)
      throw new Error(
        `${arm}: ${status === "timeout" ? `did not finish within ${RUN_TIMEOUT_MS / 1000} s` : `exited with ${status}`}; log ${proc.logFile}:\n${proc.output().slice(-3000)}`,
      );
    const line = proc
      .stdout()
      .split("\n")
      .findLast((l) => l.startsWith("{"));
    if (!line)
      throw new Error(`${arm}: the client printed no result; output:\n${proc.output().slice(-3000)}`);
    const result = JSON.parse(line) as ClientResult;
    // The arm is what it says: the transparent arm ran in the namespaces (exec's own line; it
    // never falls back under --network=transparent) and the proxy arm's client had ALL_PROXY.
    if (
      arm === "transparent" &&
      !/network, DNS and files: the default cluster's \(transparent/.test(proc.output())
    )
      throw new Error(
        `transparent: exec did not report the transparent network:\n${proc.output().slice(-3000)}`,
      );
    if (arm === "proxy" && !result.allProxy?.startsWith("socks5"))
      throw new Error(`proxy: the client had no socks5 ALL_PROXY (${result.allProxy})`);
    if (marks.length === 3)
      result.cpu = { connect: cpuDelta(marks[0]!, marks[1]!, 8), bulk: cpuDelta(marks[1]!, marks[2]!, 8) };
    return result;
  } finally {
    await proc.stop(0, "SIGKILL");
  }
}

const PHASES = ["connect", "bulk"] as const;
type Phase = (typeof PHASES)[number];

interface ArmFigures {
  bulkMiBps: number[];
  connectP50Ms: number[];
  connectP99Ms: number[];
  /** Per phase, summed over the runs: its wall seconds and the CPU seconds of each busy process. */
  cpu: Record<Phase, { wallS: number; byProcess: Record<string, number> }>;
}

/** A process as cpu-support names it, shorter: a binary by its file name. */
const shortName = (name: string) =>
  !name ? "(exited meanwhile)" : name.startsWith("/") ? name.slice(name.lastIndexOf("/") + 1) : name;

function addCpu(f: ArmFigures, r: ClientResult): void {
  const wallMs = { connect: r.connectMs.reduce((a, b) => a + b, 0), bulk: r.bulk.ms };
  for (const phase of PHASES) {
    const into = f.cpu[phase];
    into.wallS = round(into.wallS + wallMs[phase] / 1000, 2);
    for (const p of r.cpu?.[phase] ?? [])
      if (p.cpuSeconds > 0)
        into.byProcess[shortName(p.name)] = round((into.byProcess[shortName(p.name)] ?? 0) + p.cpuSeconds, 2);
  }
}

const med = (xs: readonly number[]) => pct(xs, 50);

async function measure(stack: PodStack, o: TransparentBenchOptions) {
  const east = stack.workloads.east!;
  const dest = await startDestination(adminKc(stack, "east"), east.nodeIp);
  console.log(
    `destination: ${NAME} in east, ClusterIP ${dest.clusterIp}:${SERVER_PORT} (proxy, transparent), ` +
      `NodePort ${dest.nodeIp}:${dest.nodePort} from this machine (direct)`,
  );
  const figures = Object.fromEntries(
    ARMS.map((a) => {
      const cpu = { connect: { wallS: 0, byProcess: {} }, bulk: { wallS: 0, byProcess: {} } };
      return [a, { bulkMiBps: [], connectP50Ms: [], connectP99Ms: [], cpu } as ArmFigures];
    }),
  ) as Record<Arm, ArmFigures>;
  for (let run = 0; run < o.runs; run++) {
    // The arms take turns, starting one further each run, so drift hits each alike.
    for (let k = 0; k < ARMS.length; k++) {
      const arm = ARMS[(run + k) % ARMS.length]!;
      const r = await runClient(stack, arm, dest, o.mib);
      const f = figures[arm];
      f.bulkMiBps.push(r.bulk.mibPerS);
      f.connectP50Ms.push(round(pct(r.connectMs, 50)));
      f.connectP99Ms.push(round(pct(r.connectMs, 99)));
      addCpu(f, r);
      console.log(
        `run ${run + 1}/${o.runs} ${arm.padEnd(11)} bulk ${r.bulk.mibPerS.toFixed(1)} MiB/s, connect p50 ` +
          `${f.connectP50Ms.at(-1)!.toFixed(3)} ms, p99 ${f.connectP99Ms.at(-1)!.toFixed(3)} ms`,
      );
      // Each exec injected the agent and rolled the demos out; the next arm starts from the
      // demos restored and no session left.
      if (arm !== "direct" && !(await waitQuiet(stack, 180_000)))
        throw new Error(`after the ${arm} run: a session is left or a demo was not restored within 180 s`);
    }
  }
  return { dest, figures };
}

function printTable(machine: string, o: TransparentBenchOptions, figures: Record<Arm, ArmFigures>) {
  console.log(`machine: ${machine}`);
  console.log(
    `tun2socks: ${process.env.SWITCHYARD_TUN2SOCKS ? `$SWITCHYARD_TUN2SOCKS = ${process.env.SWITCHYARD_TUN2SOCKS}` : "the CLI's choice (PATH, else the binary cache)"}`,
  );
  console.log(
    `${o.runs} runs per arm, medians; bulk: ${o.mib} MiB over one connection; connect: ${CONNECTS} sequential connect + 1-byte request/response`,
  );
  console.log(
    `  ${"arm".padEnd(12)} ${"bulk MiB/s".padStart(10)}  ${"connect p50 ms".padStart(14)}  ${"p99 ms".padStart(8)}  runs (MiB/s; p50 ms)`,
  );
  for (const arm of ARMS) {
    const f = figures[arm];
    console.log(
      `  ${(arm === "direct" ? "direct (*)" : arm).padEnd(12)} ${med(f.bulkMiBps).toFixed(1).padStart(10)}  ` +
        `${med(f.connectP50Ms).toFixed(3).padStart(14)}  ${med(f.connectP99Ms).toFixed(3).padStart(8)}  ` +
        `${f.bulkMiBps.map((x) => x.toFixed(1)).join(", ")}; ${f.connectP50Ms.map((x) => x.toFixed(3)).join(", ")}`,
    );
  }
  console.log(
    "  (*) reference: this machine to the Service's NodePort on east's node, not through Switchyard",
  );
  console.log(
    "CPU seconds during each phase, all runs (the busiest processes started from this one — CLI, namespace " +
      "helper, tun2socks, client, clusters, nodes; the pods' containers, agent and router included, are not — " +
      "and the wall seconds of the phase):",
  );
  for (const phase of PHASES)
    for (const arm of ARMS) {
      const c = figures[arm].cpu[phase];
      const busiest = Object.entries(c.byProcess)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([name, sec]) => `${name} ${sec.toFixed(2)}`);
      console.log(`  ${phase.padEnd(7)} ${arm.padEnd(11)} wall ${c.wallS.toFixed(2)}: ${busiest.join(", ")}`);
    }
}

export async function runTransparentBench(
  o: TransparentBenchOptions = defaultTransparentBench,
): Promise<void> {
  requireWholeNumbers([
    ["--runs", o.runs],
    ["--mib", o.mib],
  ]);
  const cpu = cpus();
  const machine = `${cpu[0]?.model ?? "unknown CPU"}, ${cpu.length} cores, Node ${process.version}`;
  await onPodStack("transparent", async (stack) => {
    const { dest, figures } = await measure(stack, o);
    printTable(machine, o, figures);
    // Decided unrounded (support/goal.ts); rounded only where shown.
    const bulkRatio = med(figures.transparent.bulkMiBps) / med(figures.proxy.bulkMiBps);
    const addedP50 = med(figures.transparent.connectP50Ms) - med(figures.proxy.connectP50Ms);
    console.log(
      `transparent / proxy: bulk ${round(bulkRatio, 2)}x, connect p50 ${addedP50 >= 0 ? "+" : ""}${round(addedP50, 3)} ms`,
    );
    const result = {
      when: new Date().toISOString(),
      machine,
      tun2socks: process.env.SWITCHYARD_TUN2SOCKS ?? null,
      options: { ...o, connects: CONNECTS },
      destination: dest,
      direct: "this machine to the Service's NodePort on east's node",
      figures,
      medians: Object.fromEntries(
        ARMS.map((a) => [
          a,
          {
            bulkMiBps: med(figures[a].bulkMiBps),
            connectP50Ms: med(figures[a].connectP50Ms),
            connectP99Ms: med(figures[a].connectP99Ms),
          },
        ]),
      ),
      bulkRatio: round(bulkRatio, 3),
      connectAddedP50Ms: round(addedP50, 3),
    };
    console.log(`written ${writeResult("transparent", result)}`);
    const goals: Goal[] = [
      { name: "transparent-bulk", value: bulkRatio, op: ">=", target: GOAL_BULK_RATIO, unit: "x" },
      {
        name: "transparent-connect-p50",
        value: addedP50,
        op: "<=",
        target: GOAL_CONNECT_ADDED_MS,
        unit: "ms",
      },
    ];
    return goals.map((g) => decideGoal(g).line);
  });
}
