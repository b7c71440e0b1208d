// QueueConsumer: which queues a workload consumes and through which of its environment
// variables it finds each one (DESIGN §7). It lives beside the workload in every workload
// cluster (the workload's own manifests carry it), so each cluster reads its own queue's
// name or URL from its own Deployment. A session names a queue by the `id` given here;
// the member splitting that queue patches the variable to a temporary queue while sessions
// split it, and restores it exactly after the last one.
import { Type, type Static } from "@sinclair/typebox";
import { ENV_VAR_PATTERN, QUEUE_ID_PATTERN } from "./connect-params.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";
import { cel, Conditions, ObservedGeneration, StringEnum, TARGET_KINDS } from "./schema-primitives.js";

export const QUEUE_TYPES = ["SQS"] as const;
export type QueueType = (typeof QUEUE_TYPES)[number];

/** Workload kinds whose pod template the member can point at a temporary queue. */
const CONSUMER_KINDS = TARGET_KINDS.filter((k) => k !== "pod");
// `deployment/<name>` or `statefulset/<name>`, optionally `/container/<name>` (the container
// whose variable names the queue; default: the first container that has it).
const CONSUMER_PATTERN = `^(${CONSUMER_KINDS.join("|")})/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(/container/[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`;

export const ConsumedQueue = Type.Object({
  id: Type.String({
    description: "The queue's id, as sessions name it in connectParams.sqsSplit[].queueId.",
    minLength: 1,
    maxLength: 80,
    pattern: QUEUE_ID_PATTERN,
  }),
  type: StringEnum(QUEUE_TYPES, { description: "Queue service: SQS.", default: "SQS" }),
  envVar: Type.String({
    description:
      "The consumer's environment variable holding the queue's URL (https://sqs.<region>.amazonaws.com/<account>/<name>) " +
      "or its name. It must be a plain `value` in the pod template (not valueFrom).",
    minLength: 1,
    maxLength: 128,
    pattern: ENV_VAR_PATTERN,
  }),
});

export const QueueConsumerSpec = Type.Object(
  {
    consumer: Type.String({
      description:
        "The workload consuming the queues: `deployment/<name>` or `statefulset/<name>`, optionally " +
        "followed by `/container/<container>` (default: the first container that has the variable).",
      minLength: 1,
      maxLength: 340,
      pattern: CONSUMER_PATTERN,
    }),
    queues: Type.Array(ConsumedQueue, {
      description: "The queues it consumes.",
      minItems: 1,
      maxItems: 16,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["id"],
      ...cel({
        rule: "self.all(q, self.exists_one(o, o.envVar == q.envVar))",
        message: "each queue needs a variable of its own: two queues name the same envVar",
      }),
    }),
  },
  { description: "Which queues a workload consumes, and where it finds each." },
);

export const QueueConsumerStatus = Type.Object(
  {
    conditions: Type.Optional(Conditions()),
    observedGeneration: Type.Optional(ObservedGeneration()),
  },
  { description: "Observed state, written by the member control plane." },
);

export type QueueConsumerSpec = Static<typeof QueueConsumerSpec>;
export type QueueConsumerStatus = Static<typeof QueueConsumerStatus>;
export type ConsumedQueue = Static<typeof ConsumedQueue>;
export type QueueConsumer = CustomResource<QueueConsumerSpec, QueueConsumerStatus>;

export const queueConsumerCrd = {
  kind: "QueueConsumer",
  plural: "queueconsumers",
  singular: "queueconsumer",
  shortNames: ["qc", "syqc"],
  scope: "Namespaced",
  description:
    "Which queues a workload consumes and through which environment variable it finds each: what " +
    "sessions split (connectParams.sqsSplit names the ids).",
  spec: QueueConsumerSpec,
  status: QueueConsumerStatus,
  printerColumns: [
    { name: "Consumer", type: "string", jsonPath: ".spec.consumer", description: "Consuming workload." },
    { name: "Queues", type: "string", jsonPath: ".spec.queues[*].id", description: "Queue ids." },
  ],
} satisfies CrdDefinition<typeof QueueConsumerSpec, typeof QueueConsumerStatus>;
