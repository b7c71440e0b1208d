// The CLI's side of SQS queue splitting against a real API server (test/env) with the
// Switchyard CRDs, as a client-certificate user under RBAC: `exec` with `queues` in
// switchyard.json puts them in the session's connectParams.sqsSplit (a MultiClusterSession
// on a Primary, a ClusterSession in single-cluster mode), prints each split's phase changes,
// warns once about a QueueSplitOverlap condition, waits past Ready until every split is
// Splitting and then asks the Default agent to rewrite each split variable to its output
// queue (EnvGet.queues); a Failed split ends the start with its reason and deletes the
// session; a single-cluster install that does not advertise SqsQueueSplitting is refused
// before anything is created; `queues status` and `queues consumers` read the sessions and QueueConsumers.
//
// The test plays the control planes: the Primary (simulated-primary.ts marks parents Ready
// and routes them to scripted agents east, the Default, and west), a single-cluster member
// (below), and what both write about splits (status.queues, the overlap condition). The
// real agent's rewrite of the variable is the agent's own suite's; here the EnvGet it
// receives is checked.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  API_VERSION,
  OPERATOR_OBJECT_NAME,
  clusterSessionClient,
  multiClusterSessionClient,
  queueConsumerClient,
  switchyardOperatorClient,
  type ClusterSession,
  type QueueSplitStatus,
  type SwitchyardOperatorStatus,
} from "../../../proto/api/v1alpha1/index.js";
import type { ScriptedAgent } from "../../peers/scripted-agent.js";
import type { ClusterSet } from "../../env/index.js";
import { eventually } from "../../support/poll.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import type { RouterProcess } from "../router/router-process.js";
import {
  condition,
  configFile as scratchConfigFile,
  runCli,
  startCli,
  startDeveloperCluster,
  switchyardRule,
  waitForFile,
  type DeveloperCluster,
} from "./developer-cluster.js";
import { simulatePrimary } from "./simulated-primary.js";

const NS = "shop";
const TARGET = "deployment/shop";
const F = pb.FrameFamily;
const ORDERS_URL = "https://sqs.eu-north-1.amazonaws.com/111122223333/sy-orders-4f2a";
// A Primary need not split queues itself (a management-only one never advertises it): its
// members do. Single-cluster mode needs the feature on the one operator.
const FEATURES = ["MultiClusterPrimary"];

let env: DeveloperCluster;
let set: ClusterSet;
let admin: KubeConfig;
let alice: string;
let router: RouterProcess;
let east: ScriptedAgent;
let west: ScriptedAgent;

/** Runs the CLI as alice; `o` fills while it runs. */
const start = (...args: string[]) => startCli(["--kubeconfig", alice, "-n", NS, ...args]);
const cli = (...args: string[]) => runCli(["--kubeconfig", alice, "-n", NS, ...args]);
const configFile = (cfg: Record<string, unknown>) => scratchConfigFile("switchyard-queues-", TARGET, cfg);

const operatorStatus = (features: string[]): SwitchyardOperatorStatus => ({
  supportedFeatures: features,
  defaultNamespace: NS,
  routerEndpoint: `ws://127.0.0.1:${router.port}`,
});

async function setFeatures(features: string[]): Promise<void> {
  await switchyardOperatorClient(admin).patchStatus({ name: OPERATOR_OBJECT_NAME }, operatorStatus(features));
}

beforeAll(async () => {
  env = await startDeveloperCluster({
    namespace: NS,
    rules: [
      switchyardRule(["multiclustersessions", "clustersessions"]),
      switchyardRule(["queueconsumers"], ["get", "list"]),
    ],
    eastEnv: {
      ORDERS_QUEUE_URL: "https://sqs.eu-north-1.amazonaws.com/111122223333/orders",
      REFUNDS_QUEUE: "refunds",
    },
  });
  ({ set, admin, alice, router, east, west } = env);
  await setFeatures(FEATURES);
}, 240_000);

afterAll(() => env?.stop());

const waiting = (queueId: string, envVar: string): QueueSplitStatus => ({
  queueId,
  envVar,
  phase: "Waiting",
  reason: "CreatingQueues",
  message: `creating the temporary queues of ${queueId}`,
});

const splitting = (queueId: string, envVar: string, localValue: string): QueueSplitStatus => ({
  queueId,
  envVar,
  phase: "Splitting",
  localValue,
  outputQueueUrl: localValue.startsWith("https://") ? localValue : `https://sqs.example/1/${localValue}`,
});

const envGets = () => east.inbox.all.filter((f) => f.family === F.ENV && f.kind === pb.EnvKind.GET);

const sessionsLeft = async () => [
  ...(await multiClusterSessionClient(admin).list({ namespace: NS })).items,
  ...(await clusterSessionClient(admin).list({ namespace: NS })).items,
];

const QUEUES = [
  { id: "orders", messageFilter: { tenant: "^dev-alice$" } },
  { id: "refunds", bodyFilter: [{ path: "$.order.tier", matches: "^gold$" }], mode: "mirror" },
];

describe("exec with queue splits on a Primary", () => {
  it("names the splits in the session, waits until they split, warns once of an overlap and asks for the rewrites", async () => {
    const sessions = simulatePrimary({ admin, namespace: NS, router, east, west });
    const done = join(testScratchDir("switchyard-queue-cmd-"), "done");
    const envGetsBefore = envGets().length;
    try {
      const { o, exited } = start("exec", "-f", configFile({ queues: QUEUES }), "--", ...waitForFile(done));
      const parent = await eventually("the session from the CLI", async () => sessions.seen.at(-1));
      const ref = { name: parent.metadata.name!, namespace: NS };
      expect(parent.spec.connectParams?.sqsSplit).toEqual([
        // The API server's default for the mode the file left out.
        { queueId: "orders", messageFilter: { tenant: "^dev-alice$" }, mode: "steal" },
        { queueId: "refunds", bodyFilter: [{ path: "$.order.tier", matches: "^gold$" }], mode: "mirror" },
      ]);
      const overlap = condition(
        "QueueSplitOverlap",
        "True",
        "FiltersOverlap",
        `queue orders: this session's filter tenant=~^dev-alice$ can match the same messages as session mc-0000000000000001's tenant=~^dev-; that session (admitted first) gets them`,
      );
      await multiClusterSessionClient(admin).patchStatus(ref, {
        queues: [waiting("orders", "ORDERS_QUEUE_URL"), waiting("refunds", "REFUNDS_QUEUE")],
        conditions: [overlap],
      });
      // Ready, but the splits are not splitting yet: no EnvGet, or the local process would
      // read the deployed consumers' own queue.
      await eventually("the Ready line and the Waiting lines", async () =>
        /Ready — east \(default\): ready/.test(o.err) && o.err.includes("queue split refunds")
          ? true
          : undefined,
      );
      expect(o.err).toContain(
        "queue split orders (ORDERS_QUEUE_URL) Waiting — CreatingQueues: creating the temporary queues of orders",
      );
      expect(envGets()).toHaveLength(envGetsBefore);
      await multiClusterSessionClient(admin).patchStatus(ref, {
        queues: [splitting("orders", "ORDERS_QUEUE_URL", ORDERS_URL), waiting("refunds", "REFUNDS_QUEUE")],
      });
      await multiClusterSessionClient(admin).patchStatus(ref, {
        queues: [
          splitting("orders", "ORDERS_QUEUE_URL", ORDERS_URL),
          splitting("refunds", "REFUNDS_QUEUE", "sy-refunds-4f2a"),
        ],
      });

      const get = await east.inbox.waitFor(
        (f) => f.family === F.ENV && f.kind === pb.EnvKind.GET && f.as(pb.EnvGetSchema).queues.length > 0,
        60_000,
        "the EnvGet asking for the queue rewrites",
      );
      expect(get.as(pb.EnvGetSchema).queues.map((q) => ({ variable: q.variable, value: q.value }))).toEqual([
        { variable: "ORDERS_QUEUE_URL", value: ORDERS_URL },
        { variable: "REFUNDS_QUEUE", value: "sy-refunds-4f2a" },
      ]);
      writeFileSync(done, "");
      expect(await exited).toBe(0);
      expect(o.err).toContain("queue split orders (ORDERS_QUEUE_URL) Splitting");
      expect(o.err).toContain(
        `ORDERS_QUEUE_URL → ${ORDERS_URL} (queue orders, steal: messages where tenant=~^dev-alice$)`,
      );
      expect(o.err).toContain(
        "REFUNDS_QUEUE → sy-refunds-4f2a (queue refunds, mirror: messages where $.order.tier=~^gold$)",
      );
      expect(o.err.split(`switchyard: warning: ${overlap.message}`)).toHaveLength(2);
      // One line per change: the orders split reported Splitting once, however often the status moved.
      expect(o.err.match(/queue split orders \(ORDERS_QUEUE_URL\) Splitting/g)).toHaveLength(1);
      expect(await sessionsLeft()).toHaveLength(0);
    } finally {
      sessions.stop();
    }
  });

  it("ends the start with a Failed split's reason and deletes the session", async () => {
    const sessions = simulatePrimary({ admin, namespace: NS, router, east, west });
    try {
      const { o, exited } = start("exec", "-f", configFile({ queues: [QUEUES[0]] }), "--", "true");
      const parent = await eventually("the session from the CLI", async () => sessions.seen.at(-1));
      await multiClusterSessionClient(admin).patchStatus(
        { name: parent.metadata.name!, namespace: NS },
        {
          queues: [
            {
              queueId: "orders",
              envVar: "ORDERS_QUEUE_URL",
              phase: "Failed",
              reason: "QueueNotFound",
              message: "ORDERS_QUEUE_URL names queue orders, which does not exist in eu-north-1",
            },
          ],
        },
      );
      expect(await exited).toBe(1);
      expect(o.err).toContain(
        `session ${parent.metadata.name} could not split its queues: queue orders: Failed — QueueNotFound: ` +
          "ORDERS_QUEUE_URL names queue orders, which does not exist in eu-north-1",
      );
      expect(o.err).toContain("[SWITCHYARD_CLI_QUEUE_SPLIT_FAILED]");
      expect(await sessionsLeft()).toHaveLength(0);
    } finally {
      sessions.stop();
    }
  });

  it("gives up after --ready-timeout naming the split that never reported", async () => {
    const sessions = simulatePrimary({ admin, namespace: NS, router, east, west });
    try {
      const cfg = configFile({ queues: [QUEUES[0]] });
      const r = await cli("exec", "-f", cfg, "--ready-timeout", "3", "--", "true");
      expect(r.code).toBe(1);
      expect(r.err).toMatch(
        /was not ready after 3 s \(phase \w+.*queue orders: no status yet \(is queues\.sqs\.enabled on its workload clusters\?\)\)/,
      );
      expect(r.err).toContain("[SWITCHYARD_CLI_SESSION_TIMEOUT]");
      expect(await sessionsLeft()).toHaveLength(0);
    } finally {
      sessions.stop();
    }
  });

  it("in single-cluster mode, refuses before creating anything when the install does not split queues", async () => {
    await setFeatures([]);
    try {
      const r = await cli("exec", "-f", configFile({ queues: QUEUES }), "--", "true");
      expect(r.code).toBe(1);
      expect(r.err).toContain("does not list SqsQueueSplitting");
      expect(r.err).toContain("queues.sqs.enabled=true");
      expect(r.err).toContain("[SWITCHYARD_CLI_FEATURE_UNAVAILABLE]");
      expect(await sessionsLeft()).toHaveLength(0);
    } finally {
      await setFeatures(FEATURES);
    }
  });
});

/** The test's stand-in for a single-cluster control plane: routes each new ClusterSession to east and marks it Ready. */
function simulateMember(): { stop(): void } {
  let ctl: AbortController | undefined;
  let stopped = false;
  void new Watch(admin)
    .watch(
      `/apis/${API_VERSION}/namespaces/${NS}/clustersessions`,
      {},
      (type, obj: ClusterSession) => {
        if (type !== "ADDED") return;
        const id = obj.metadata.name!;
        const key = sessionKey(NS, id);
        router.reload(
          JSON.stringify([
            {
              sessionId: key,
              clientKeyHash: obj.spec.clientKeyHash,
              state: "SESSION_STATE_READY",
              upstreams: [{ cluster: "primary", url: east.url(id), secret: "agent-east", isDefault: true }],
            },
          ]),
        );
        void eventually(`route of ${id}`, async () =>
          (await (await fetch(`${router.adminBase}/debug/routes`)).text()).includes(key) ? true : undefined,
        )
          .then(() =>
            clusterSessionClient(admin).patchStatus(
              { name: id, namespace: NS },
              {
                phase: "Ready",
                gateway: `ws://127.0.0.1:${router.port}`,
                pod: { name: "shop-0", ip: "10.0.0.7", container: "app" },
              },
            ),
          )
          .catch(() => {});
      },
      () => {},
    )
    .then((c) => {
      ctl = c;
      if (stopped) c.abort();
    });
  return {
    stop: () => {
      stopped = true;
      ctl?.abort();
    },
  };
}

describe("exec with queue splits in single-cluster mode", () => {
  it("puts the splits in the ClusterSession and rewrites from its status.queues", async () => {
    await setFeatures(["SqsQueueSplitting"]);
    const member = simulateMember();
    const done = join(testScratchDir("switchyard-queue-single-"), "done");
    try {
      const { o, exited } = start(
        "exec",
        "-f",
        configFile({ queues: [QUEUES[0]] }),
        "--",
        ...waitForFile(done),
      );
      const session = await eventually("the ClusterSession from the CLI", async () =>
        (await clusterSessionClient(admin).list({ namespace: NS })).items.at(0),
      );
      expect(session.metadata.name).toMatch(/^cs-[0-9a-f]{16}$/);
      expect(session.spec.connectParams?.sqsSplit).toEqual([
        { queueId: "orders", messageFilter: { tenant: "^dev-alice$" }, mode: "steal" },
      ]);
      await clusterSessionClient(admin).patchStatus(
        { name: session.metadata.name!, namespace: NS },
        { queues: [splitting("orders", "ORDERS_QUEUE_URL", "sy-orders-single")] },
      );
      const get = await east.inbox.waitFor(
        (f) =>
          f.family === F.ENV &&
          f.kind === pb.EnvKind.GET &&
          f.as(pb.EnvGetSchema).queues.some((q) => q.value === "sy-orders-single"),
        60_000,
        "the single-cluster EnvGet",
      );
      expect(get.as(pb.EnvGetSchema).queues.map((q) => q.variable)).toEqual(["ORDERS_QUEUE_URL"]);
      writeFileSync(done, "");
      expect(await exited).toBe(0);
      expect(o.err).toContain(`created single-cluster session ${session.metadata.name}`);
      expect(await sessionsLeft()).toHaveLength(0);
    } finally {
      member.stop();
      await setFeatures(FEATURES);
    }
  });
});

describe("switchyard queues", () => {
  it("lists each session's splits per cluster, from the parent on a Primary and the ClusterSession alone", async () => {
    const parent = "mc-00000000000000aa";
    await multiClusterSessionClient(admin).create({
      metadata: { name: parent, namespace: NS },
      spec: {
        target: TARGET,
        clientKeyHash: "a".repeat(64),
        connectParams: {
          sqsSplit: [
            { queueId: "orders", messageFilter: { tenant: "^dev-alice$" } },
            { queueId: "refunds", bodyFilter: [{ path: "$.tier", matches: "gold" }], mode: "mirror" },
          ],
        },
      },
    });
    await multiClusterSessionClient(admin).patchStatus(
      { name: parent, namespace: NS },
      {
        phase: "Ready",
        children: {
          east: { name: `${parent}-east`, ready: true, gateway: "wss://east.gw", defaultCluster: true },
          west: { name: `${parent}-west`, ready: true, gateway: "wss://west.gw" },
        },
        queues: [splitting("orders", "ORDERS_QUEUE_URL", ORDERS_URL)],
      },
    );
    try {
      const json = await cli("queues", "status", "-o", "json");
      expect(json.code).toBe(0);
      expect(JSON.parse(json.out)).toEqual({
        queues: [
          {
            session: parent,
            namespace: NS,
            kind: "MultiClusterSession",
            cluster: "east",
            queueId: "orders",
            phase: "Splitting",
            mode: "steal",
            envVar: "ORDERS_QUEUE_URL",
            outputQueueUrl: ORDERS_URL,
            localValue: ORDERS_URL,
          },
          {
            session: parent,
            namespace: NS,
            kind: "MultiClusterSession",
            cluster: "east",
            queueId: "refunds",
            phase: "-",
            mode: "mirror",
            message: "no status yet",
          },
        ],
      });
      const table = await cli("queues", "status");
      expect(table.out).toMatch(/^SESSION\s+CLUSTER\s+QUEUE\s+PHASE\s+MODE\s+OUTPUT QUEUE\s+MESSAGE$/m);
      expect(table.out).toMatch(
        new RegExp(`^${parent}\\s+east\\s+orders\\s+Splitting\\s+steal\\s+\\S+sy-orders-4f2a\\s+-$`, "m"),
      );
      expect(table.out).toMatch(
        new RegExp(`^${parent}\\s+east\\s+refunds\\s+-\\s+mirror\\s+-\\s+no status yet$`, "m"),
      );

      // Single-cluster mode: the ClusterSessions' own status.
      await setFeatures(["SqsQueueSplitting"]);
      await clusterSessionClient(admin).create({
        metadata: { name: "cs-00000000000000bb", namespace: NS },
        spec: {
          target: TARGET,
          clientKeyHash: "b".repeat(64),
          connectParams: { sqsSplit: [{ queueId: "orders", messageFilter: { tenant: "x" } }] },
        },
      });
      await clusterSessionClient(admin).patchStatus(
        { name: "cs-00000000000000bb", namespace: NS },
        { queues: [{ ...waiting("orders", "ORDERS_QUEUE_URL") }] },
      );
      const single = await cli("queues", "status");
      expect(single.out).toMatch(
        /^cs-00000000000000bb\s+primary\s+orders\s+Waiting\s+steal\s+-\s+CreatingQueues: creating the temporary queues of orders$/m,
      );
      expect(single.out).not.toContain(parent);
    } finally {
      await setFeatures(FEATURES);
      await multiClusterSessionClient(admin).delete({ name: parent, namespace: NS });
      await clusterSessionClient(admin).delete({ name: "cs-00000000000000bb", namespace: NS });
    }
  });

  it("lists the QueueConsumers with their queues and variables", async () => {
    expect((await cli("queues", "consumers")).out).toBe("No queue consumers.\n");
    await queueConsumerClient(admin).create({
      metadata: { name: "shop-worker", namespace: NS },
      spec: {
        consumer: "deployment/shop/container/worker",
        queues: [
          { id: "orders", type: "SQS", envVar: "ORDERS_QUEUE_URL" },
          { id: "refunds", type: "SQS", envVar: "REFUNDS_QUEUE" },
        ],
      },
    });
    const table = await cli("queues", "consumers");
    expect(table.code).toBe(0);
    expect(table.out).toMatch(/^NAME\s+CONSUMER\s+QUEUES\s+ENV VARS$/m);
    expect(table.out).toMatch(
      /^shop-worker\s+deployment\/shop\/container\/worker\s+orders,refunds\s+ORDERS_QUEUE_URL,REFUNDS_QUEUE$/m,
    );
    expect(JSON.parse((await cli("queues", "consumers", "-o", "json")).out)).toEqual({
      consumers: [
        {
          name: "shop-worker",
          namespace: NS,
          consumer: "deployment/shop/container/worker",
          queues: [
            { id: "orders", type: "SQS", envVar: "ORDERS_QUEUE_URL" },
            { id: "refunds", type: "SQS", envVar: "REFUNDS_QUEUE" },
          ],
        },
      ],
    });
  });

  it("names the permission a user lacks", async () => {
    const bob = (await set.get("primary").mintUser("bob", [])).kubeconfigPath;
    const r = await runCli(["--kubeconfig", bob, "-n", NS, "queues", "consumers"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('not allowed to list queueconsumers.switchyard.dev in namespace "shop"');
    expect(r.err).toContain("[SWITCHYARD_CLI_FORBIDDEN]");
  });
});
