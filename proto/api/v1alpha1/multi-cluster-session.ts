// MultiClusterSession: the parent session the CLI creates on the Primary, in the
// target's namespace (RBAC on it decides who may open sessions where). The Primary's
// reconciler owns its status: one child ClusterSession per workload cluster, mirrored in
// `status.children`, and the heartbeat `connectedTimestamp`.
import { Type, type Static } from "@sinclair/typebox";
import { ConnectParams } from "./connect-params.js";
import { QueueSplitStatus } from "./cluster-session.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";
import {
  cel,
  Conditions,
  DNS_LABEL_PATTERN,
  DnsSubdomain,
  EndpointUrl,
  immutable,
  MapOf,
  Message,
  ObservedGeneration,
  PARENT_NAME_PATTERN,
  Sha256Hex,
  StringEnum,
  TargetRef,
  Timestamp,
  TtlSeconds,
} from "./schema-primitives.js";

export const FAILURE_POLICIES = ["AllOrNothing", "BestEffort"] as const;
export type FailurePolicy = (typeof FAILURE_POLICIES)[number];

export const MULTI_CLUSTER_SESSION_PHASES = [
  "Initializing",
  "Pending",
  "Ready",
  "Failed",
  "Terminating",
] as const;
export type MultiClusterSessionPhase = (typeof MULTI_CLUSTER_SESSION_PHASES)[number];

export const MultiClusterSessionSpec = Type.Object(
  {
    target: TargetRef(cel(immutable("spec.target"))),
    clientKeyHash: Sha256Hex(
      "Lowercase hex sha256 of the secret only the CLI holds; routers admit the client that proves it.",
      cel(immutable("spec.clientKeyHash")),
    ),
    connectParams: Type.Optional(ConnectParams),
    ttlSeconds: Type.Optional(TtlSeconds("Seconds without a heartbeat after which the session is deleted.")),
    failurePolicy: Type.Optional(
      StringEnum(FAILURE_POLICIES, {
        description:
          "AllOrNothing: the session fails when any child fails. BestEffort: it is Ready (and Degraded) " +
          "when only non-default children failed.",
        default: "AllOrNothing",
      }),
    ),
  },
  { description: "What the developer asked for." },
);

export const ChildSessionStatus = Type.Object(
  {
    name: DnsSubdomain("Name of the child ClusterSession on that cluster."),
    ready: Type.Boolean({ description: "The child reported Ready." }),
    error: Type.Optional(Message("Why the child is not ready or could not be created.")),
    gateway: Type.Optional(EndpointUrl("Gateway router URL of the child.")),
    defaultCluster: Type.Optional(Type.Boolean({ description: "This child is on the Default cluster." })),
  },
  cel({
    rule: "!self.ready || has(self.gateway)",
    message: "a ready child must name its gateway",
    fieldPath: ".gateway",
  }),
);

export const MultiClusterSessionStatus = Type.Object(
  {
    phase: Type.Optional(
      StringEnum(MULTI_CLUSTER_SESSION_PHASES, {
        description: "Initializing → Pending → Ready, or Failed; Terminating while children are deleted.",
      }),
    ),
    children: Type.Optional(
      MapOf(DNS_LABEL_PATTERN, ChildSessionStatus, {
        description:
          "Workload cluster → its child session. Cleanup reads children from here, never from memory.",
        maxProperties: 64,
        keyMaxLength: 63,
      }),
    ),
    connectedTimestamp: Type.Optional(
      Timestamp("Last heartbeat of a connected client (refreshed every 10 s)."),
    ),
    queues: Type.Optional(
      Type.Array(QueueSplitStatus, {
        description:
          "The session's queue splits as its Default cluster's child reports them (output queue and the " +
          "value the local process's variable gets); every child's own state is on that child.",
        maxItems: 16,
      }),
    ),
    conditions: Type.Optional(Conditions()),
    observedGeneration: Type.Optional(ObservedGeneration()),
  },
  { description: "Observed state, written by the Primary's control plane." },
);

export type MultiClusterSessionSpec = Static<typeof MultiClusterSessionSpec>;
export type MultiClusterSessionStatus = Static<typeof MultiClusterSessionStatus>;
export type ChildSessionStatus = Static<typeof ChildSessionStatus>;
export type MultiClusterSession = CustomResource<MultiClusterSessionSpec, MultiClusterSessionStatus>;

export const multiClusterSessionCrd = {
  kind: "MultiClusterSession",
  plural: "multiclustersessions",
  singular: "multiclustersession",
  shortNames: ["mcsession", "symcs"],
  scope: "Namespaced",
  description:
    "A session spanning every workload cluster: the parent the CLI creates on the Primary. " +
    "Named mc-<16 hex>; its children are ClusterSessions named mc-<16 hex>-<cluster>.",
  spec: MultiClusterSessionSpec,
  status: MultiClusterSessionStatus,
  rootRules: [
    {
      rule: `self.metadata.name.matches('${PARENT_NAME_PATTERN}')`,
      message: "metadata.name must be mc-<16 lowercase hex digits>, e.g. mc-4dbe55ab68bba16c",
    },
  ],
  printerColumns: [
    { name: "Target", type: "string", jsonPath: ".spec.target", description: "Target of the session." },
    { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Lifecycle phase." },
    {
      name: "Ready",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].status',
      description: "Ready condition.",
    },
    { name: "Policy", type: "string", jsonPath: ".spec.failurePolicy", description: "Failure policy." },
    {
      name: "TTL",
      type: "integer",
      jsonPath: ".spec.ttlSeconds",
      description: "TTL in seconds.",
      priority: 1,
    },
    {
      name: "Heartbeat",
      type: "date",
      jsonPath: ".status.connectedTimestamp",
      description: "Last client heartbeat.",
      priority: 1,
    },
  ],
} satisfies CrdDefinition<typeof MultiClusterSessionSpec, typeof MultiClusterSessionStatus>;
