// ClusterSession: a session in one cluster. As a child it is created by a Primary on a
// workload cluster (named <parent>-<cluster>, labelled with the parent and the owning
// Primary, see api-group.ts LABELS); in single-cluster mode it is the whole session. The
// member control plane owns phase, gateway and pod; the owning Primary renews
// `status.renewedAt`, and a member whose Primary stopped renewing cleans up by itself.
import { Type, type Static } from "@sinclair/typebox";
import { ConnectParams } from "./connect-params.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";
import {
  cel,
  Conditions,
  DnsLabel,
  DnsSubdomain,
  EndpointUrl,
  immutable,
  Message,
  NonNegativeInt,
  ObservedGeneration,
  PARENT_NAME_PATTERN,
  Sha256Hex,
  StringEnum,
  TargetRef,
  Timestamp,
  TtlSeconds,
} from "./schema-primitives.js";

export const CLUSTER_SESSION_PHASES = ["Pending", "Ready", "Failed", "Terminating"] as const;
export type ClusterSessionPhase = (typeof CLUSTER_SESSION_PHASES)[number];

export const ParentRef = Type.Object(
  {
    name: Type.String({
      description:
        "Name of the parent MultiClusterSession (mc-<16 hex>), in the same namespace on the Primary.",
      minLength: 19,
      maxLength: 19,
      pattern: PARENT_NAME_PATTERN,
    }),
    cluster: DnsLabel("Name of the workload cluster this child lives in, as the Primary calls it."),
    primaryClusterId: DnsLabel("Cluster id of the Primary that owns this child."),
    defaultCluster: Type.Optional(
      Type.Boolean({
        description:
          "This child is on the session's Default cluster: it makes the session's SQS output queues " +
          "(the one queue per split the local process reads) and reports them in status.queues.",
      }),
    ),
  },
  {
    description: "Set on children of a MultiClusterSession; absent in single-cluster mode.",
    ...cel(immutable("spec.parent")),
  },
);

export const ClusterSessionSpec = Type.Object(
  {
    target: TargetRef(cel(immutable("spec.target"))),
    clientKeyHash: Sha256Hex(
      "Lowercase hex sha256 of the secret the client presents: the CLI's in single-cluster mode, " +
        "the per-child secret of the Primary's routers for a child.",
      cel(immutable("spec.clientKeyHash")),
    ),
    connectParams: Type.Optional(ConnectParams),
    ttlSeconds: Type.Optional(
      TtlSeconds("Seconds after status.renewedAt (or creation) after which the member deletes the session."),
    ),
    parent: Type.Optional(ParentRef),
  },
  { description: "What this cluster's part of the session is." },
);

export const ResolvedPod = Type.Object(
  {
    name: DnsSubdomain("Pod the target resolved to; it answers stateful operations."),
    ip: Type.Optional(Type.String({ description: "Pod IP.", maxLength: 45, pattern: "^[0-9a-fA-F.:]+$" })),
    container: Type.Optional(DnsLabel("Container the session runs against.")),
  },
  { description: "The pod the target resolved to." },
);

export const QUEUE_SPLIT_PHASES = ["Waiting", "Splitting", "Failed"] as const;
export type QueueSplitPhase = (typeof QUEUE_SPLIT_PHASES)[number];

export const QueueSplitStatus = Type.Object({
  queueId: Type.String({ description: "The split's queue id.", maxLength: 80 }),
  phase: StringEnum(QUEUE_SPLIT_PHASES, {
    description:
      "Waiting (temporary queues being made, the output queue not known yet), Splitting (this cluster's " +
      "splitter routes the session's messages), or Failed (see message).",
  }),
  envVar: Type.Optional(
    Type.String({ description: "The target's variable naming the queue.", maxLength: 128 }),
  ),
  outputQueueUrl: Type.Optional(
    Type.String({
      description: "URL of the session's output queue (made by the Default cluster, or this one alone).",
      maxLength: 2048,
    }),
  ),
  localValue: Type.Optional(
    Type.String({
      description:
        "What the local process's envVar holds: the output queue's URL, or its name when the target's " +
        "variable holds a name.",
      maxLength: 2048,
    }),
  ),
  reason: Type.Optional(Type.String({ description: "CamelCase reason of the phase.", maxLength: 128 })),
  message: Type.Optional(Message("What is happening or what to fix.")),
});

export const ClusterSessionStatus = Type.Object(
  {
    phase: Type.Optional(
      StringEnum(CLUSTER_SESSION_PHASES, {
        description: "Pending → Ready, or Failed; Terminating during cleanup.",
      }),
    ),
    gateway: Type.Optional(EndpointUrl("URL of the gateway router serving this session in this cluster.")),
    pod: Type.Optional(ResolvedPod),
    agents: Type.Optional(NonNegativeInt("Agents currently serving the target (one per ready replica).")),
    renewedAt: Type.Optional(
      Timestamp("Last renewal by the owning Primary; the session expires ttlSeconds after it."),
    ),
    queues: Type.Optional(
      Type.Array(QueueSplitStatus, {
        description: "One entry per connectParams.sqsSplit entry: this cluster's part of the split.",
        maxItems: 16,
      }),
    ),
    conditions: Type.Optional(Conditions()),
    observedGeneration: Type.Optional(ObservedGeneration()),
  },
  {
    description: "Observed state, written by the member control plane (renewedAt by the owning Primary).",
  },
);

export type ClusterSessionSpec = Static<typeof ClusterSessionSpec>;
export type ClusterSessionStatus = Static<typeof ClusterSessionStatus>;
export type ParentRef = Static<typeof ParentRef>;
export type QueueSplitStatus = Static<typeof QueueSplitStatus>;
export type ClusterSession = CustomResource<ClusterSessionSpec, ClusterSessionStatus>;

export const clusterSessionCrd = {
  kind: "ClusterSession",
  plural: "clustersessions",
  singular: "clustersession",
  shortNames: ["csession", "sycs"],
  scope: "Namespaced",
  description:
    "A session in one cluster: a child of a MultiClusterSession (named <parent>-<cluster>) or, in " +
    "single-cluster mode, the whole session.",
  spec: ClusterSessionSpec,
  status: ClusterSessionStatus,
  rootRules: [
    {
      // A release-only session (connectParams.releaseAgents) serves no pod: Ready means answered.
      rule:
        "!has(self.status) || !has(self.status.phase) || self.status.phase != 'Ready' || " +
        "(has(self.status.gateway) && has(self.status.pod)) || " +
        "(has(self.spec.connectParams) && has(self.spec.connectParams.releaseAgents) && self.spec.connectParams.releaseAgents)",
      message: "a Ready session must name its gateway and resolved pod",
      fieldPath: ".status.phase",
    },
    {
      rule: "!has(self.spec.parent) || self.metadata.name == self.spec.parent.name + '-' + self.spec.parent.cluster",
      message: "a child ClusterSession must be named <spec.parent.name>-<spec.parent.cluster>",
    },
  ],
  printerColumns: [
    { name: "Target", type: "string", jsonPath: ".spec.target", description: "Target of the session." },
    { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Lifecycle phase." },
    { name: "Pod", type: "string", jsonPath: ".status.pod.name", description: "Resolved pod." },
    { name: "Parent", type: "string", jsonPath: ".spec.parent.name", description: "Parent session." },
    {
      name: "Renewed",
      type: "date",
      jsonPath: ".status.renewedAt",
      description: "Last renewal by the Primary.",
      priority: 1,
    },
    {
      name: "Gateway",
      type: "string",
      jsonPath: ".status.gateway",
      description: "Gateway URL.",
      priority: 1,
    },
  ],
} satisfies CrdDefinition<typeof ClusterSessionSpec, typeof ClusterSessionStatus>;
