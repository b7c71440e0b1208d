// SQS queue splitting's schemas against a real kube-apiserver: QueueConsumer (valid objects
// accepted with their defaults; bad consumers, empty or duplicate queues, two queues on one
// variable, bad variables, ids and types refused by the API server naming the field; printer
// columns, short names and the status subresource) and `connectParams.sqsSplit` /
// `outputQueues` on both session kinds — a split without a filter refused with the CEL
// rule's message, regexes the API server's RE2 cannot compile (lookaround, backreferences)
// refused in messageFilter and in bodyFilter.matches, bad body paths and modes refused,
// steal/mirror and http:// output queues accepted.
import { ApiextensionsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clusterSessionClient,
  crdManifests,
  multiClusterSessionClient,
  queueConsumerClient,
  type ConnectParams,
  type QueueConsumerSpec,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { condition, refused } from "./crd-writes.js";

const NS = "queue-tests";
const HASH = "0123456789abcdef".repeat(4);
let set: ClusterSet;
let kc: KubeConfig;
let counter = 0;

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  kc = set.get("primary").kubeConfig();
  await installCrds(kc, ["QueueConsumer", "ClusterSession", "MultiClusterSession"]);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await set?.stop();
});

/** A fresh counter per write, so object names never collide. */
function next(): number {
  counter += 1;
  return counter;
}

const consumers = () => queueConsumerClient(kc);

const orders: QueueConsumerSpec = {
  consumer: "deployment/shop/container/worker",
  queues: [{ id: "orders", type: "SQS", envVar: "ORDERS_QUEUE_URL" }],
};

function createConsumer(spec: Record<string, unknown>, name = `consumer-${next()}`) {
  return consumers().create({
    metadata: { name, namespace: NS },
    spec: { ...orders, ...spec } as QueueConsumerSpec,
  });
}

describe("valid QueueConsumers", () => {
  it("accepts a Deployment's container with several queues, defaulting the type to SQS", async () => {
    const created = await createConsumer({
      queues: [
        { id: "orders", envVar: "ORDERS_QUEUE_URL" },
        { id: "refunds.fifo", type: "SQS", envVar: "REFUNDS_QUEUE" },
        { id: "audit_events-2", envVar: "_AUDIT" },
      ],
    });
    expect(created.spec.queues.map((q) => q.type)).toEqual(["SQS", "SQS", "SQS"]);
    expect(created.spec.consumer).toBe("deployment/shop/container/worker");
  });

  it("accepts a StatefulSet without a container and a queue id of 80 characters", async () => {
    const created = await createConsumer({
      consumer: "statefulset/billing.v2",
      queues: [{ id: "q".repeat(80), envVar: "BILLING_QUEUE" }],
    });
    expect(created.spec.consumer).toBe("statefulset/billing.v2");
  });
});

type Case = [what: string, write: () => Promise<unknown>, field: string, message?: RegExp];

describe("invalid QueueConsumers are refused by the API server, naming the field", () => {
  it.each<Case>([
    ["a pod as consumer", () => createConsumer({ consumer: "pod/x" }), "spec.consumer"],
    ["a consumer without a name", () => createConsumer({ consumer: "deployment/" }), "spec.consumer"],
    ["a consumer of an unknown kind", () => createConsumer({ consumer: "job/x" }), "spec.consumer"],
    [
      "a consumer with a bad container part",
      () => createConsumer({ consumer: "deployment/shop/sidecar/x" }),
      "spec.consumer",
    ],
    [
      "no consumer at all",
      () =>
        consumers().create({
          metadata: { name: `consumer-${next()}`, namespace: NS },
          spec: { queues: orders.queues } as QueueConsumerSpec,
        }),
      "spec.consumer",
    ],
    ["an empty queue list", () => createConsumer({ queues: [] }), "spec.queues"],
    [
      "two queues with the same id",
      () =>
        createConsumer({
          queues: [
            { id: "orders", envVar: "ORDERS_QUEUE_URL" },
            { id: "orders", envVar: "OTHER_QUEUE_URL" },
          ],
        }),
      "spec.queues[1]",
      /Duplicate value/,
    ],
    [
      "two queues on the same envVar",
      () =>
        createConsumer({
          queues: [
            { id: "orders", envVar: "QUEUE_URL" },
            { id: "refunds", envVar: "QUEUE_URL" },
          ],
        }),
      "spec.queues",
      /each queue needs a variable of its own: two queues name the same envVar/,
    ],
    [
      "an envVar starting with a digit",
      () => createConsumer({ queues: [{ id: "orders", envVar: "1QUEUE" }] }),
      "spec.queues[0].envVar",
    ],
    [
      "an envVar with a dash",
      () => createConsumer({ queues: [{ id: "orders", envVar: "ORDERS-URL" }] }),
      "spec.queues[0].envVar",
    ],
    [
      "a queue id with a slash",
      () => createConsumer({ queues: [{ id: "shop/orders", envVar: "Q" }] }),
      "spec.queues[0].id",
    ],
    [
      "a queue id longer than 80 characters",
      () => createConsumer({ queues: [{ id: "q".repeat(81), envVar: "Q" }] }),
      "spec.queues[0].id",
    ],
    [
      "a queue of an unknown type",
      () => createConsumer({ queues: [{ id: "orders", type: "Kafka", envVar: "Q" }] }),
      "spec.queues[0].type",
    ],
  ])("%s", async (_what, write, field, message) => {
    const refusal = await refused(write());
    expect(refusal.fields).toContain(field);
    if (message) expect(refusal.message).toMatch(message);
  });
});

describe("QueueConsumer as kubectl shows it", () => {
  it("has the printer columns, short names, category and status subresource", async () => {
    const crd = await kc
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: crdManifests.QueueConsumer.metadata.name });
    const version = crd.spec.versions[0]!;
    expect(version.additionalPrinterColumns?.map((c) => c.name)).toEqual(["Consumer", "Queues", "Age"]);
    expect(version.subresources?.status).toEqual({});
    expect(crd.spec.names.shortNames).toEqual(["qc", "syqc"]);
    expect(crd.spec.names.categories).toEqual(["switchyard"]);
  });

  it("takes status writes apart from spec", async () => {
    const name = `consumer-${next()}`;
    const created = await createConsumer({}, name);
    const out = await consumers().patchStatus(
      { name, namespace: NS },
      { observedGeneration: 1, conditions: [condition("Ready", "True")] },
    );
    expect(out.status?.conditions?.[0]?.type).toBe("Ready");
    expect(out.metadata.generation).toBe(created.metadata.generation);
  });
});

// ---- connectParams.sqsSplit on both session kinds ----

const sessionKinds = [
  [
    "MultiClusterSession",
    (connectParams: Record<string, unknown>) =>
      multiClusterSessionClient(kc).create({
        metadata: { name: `mc-${next().toString(16).padStart(16, "0")}`, namespace: NS },
        spec: {
          target: "deployment/shop",
          clientKeyHash: HASH,
          connectParams: connectParams as ConnectParams,
        },
      }),
  ],
  [
    "ClusterSession",
    (connectParams: Record<string, unknown>) =>
      clusterSessionClient(kc).create({
        metadata: { name: `cs-${next()}`, namespace: NS },
        spec: {
          target: "deployment/shop",
          clientKeyHash: HASH,
          connectParams: connectParams as ConnectParams,
        },
      }),
  ],
] as const;

const split = (s: Record<string, unknown>) => ({ sqsSplit: [{ queueId: "orders", ...s }] });
const SPLIT = "spec.connectParams.sqsSplit[0]";

describe.each(sessionKinds)("sqsSplit on a %s", (_kind, create) => {
  it("accepts steal and mirror splits with attribute and body filters, and http(s) output queues", async () => {
    const connectParams = {
      sqsSplit: [
        {
          queueId: "orders",
          messageFilter: { tenant: "^dev-(alice|bob)$", "x.kind": "order|refund" },
          mode: "steal",
        },
        {
          queueId: "refunds.fifo",
          bodyFilter: [
            { path: "$.order.tier", matches: "^gold$" },
            { path: "$['items'][0].sku", matches: "(?i)^SKU-[0-9]+$" },
          ],
          mode: "mirror",
        },
        { queueId: "audit", messageFilter: { tenant: "." }, bodyFilter: [{ path: "$", matches: "." }] },
      ],
      outputQueues: {
        east: { orders: "http://127.0.0.1:9324/000000000000/sy-orders-1" },
        west: { orders: "https://sqs.eu-north-1.amazonaws.com/111122223333/sy-orders-1" },
      },
    };
    const created = await create(connectParams);
    expect(created.spec.connectParams?.sqsSplit?.map((s) => s.mode)).toEqual(["steal", "mirror", "steal"]);
    expect(created.spec.connectParams?.outputQueues).toEqual(connectParams.outputQueues);
  });

  it.each<Case>([
    [
      "a split without any filter",
      () => create(split({})),
      SPLIT,
      /name messageFilter, bodyFilter or both: a split without a filter would take every message/,
    ],
    [
      "a lookahead in messageFilter",
      () => create(split({ messageFilter: { tenant: "(?=x)" } })),
      `${SPLIT}.messageFilter`,
      /RE2 syntax/,
    ],
    [
      "a backreference in messageFilter",
      () => create(split({ messageFilter: { tenant: "(a)\\1" } })),
      `${SPLIT}.messageFilter`,
      /RE2 syntax/,
    ],
    [
      "a lookahead in bodyFilter.matches",
      () => create(split({ bodyFilter: [{ path: "$.a", matches: "(?=x)" }] })),
      `${SPLIT}.bodyFilter[0].matches`,
      /RE2 syntax/,
    ],
    [
      "a backreference in bodyFilter.matches",
      () => create(split({ bodyFilter: [{ path: "$.a", matches: "(a)\\1" }] })),
      `${SPLIT}.bodyFilter[0].matches`,
      /RE2 syntax/,
    ],
    [
      "a body path without $",
      () => create(split({ bodyFilter: [{ path: "a.b", matches: "x" }] })),
      `${SPLIT}.bodyFilter[0].path`,
    ],
    [
      "a recursive-descent body path",
      () => create(split({ bodyFilter: [{ path: "$..x", matches: "x" }] })),
      `${SPLIT}.bodyFilter[0].path`,
    ],
    [
      "a body path with an unquoted bracket",
      () => create(split({ bodyFilter: [{ path: "$[x]", matches: "x" }] })),
      `${SPLIT}.bodyFilter[0].path`,
    ],
    [
      "an unknown mode",
      () => create(split({ messageFilter: { tenant: "a" }, mode: "copy" })),
      `${SPLIT}.mode`,
    ],
    ["an empty messageFilter", () => create(split({ messageFilter: {} })), `${SPLIT}.messageFilter`],
    [
      "a bad queue id",
      () => create({ sqsSplit: [{ queueId: "shop/orders", messageFilter: { t: "a" } }] }),
      `${SPLIT}.queueId`,
    ],
    [
      "an output queue that is not an http(s) URL",
      () => create({ outputQueues: { east: { orders: "sqs://orders" } } }),
      "spec.connectParams.outputQueues.east.orders",
    ],
  ])("refuses %s, naming the field", async (_what, write, field, message) => {
    const refusal = await refused(write());
    expect(refusal.fields).toContain(field);
    if (message) expect(refusal.message).toMatch(message);
  });
});
