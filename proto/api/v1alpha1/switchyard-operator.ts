// SwitchyardOperator: the cluster-scoped singleton `operator` every cluster carries. Its
// spec summarises the install-time configuration (never secrets); its status is what the
// CLI reads to pick a mode (supportedFeatures), find the routers (routerEndpoint) and
// show cluster health (connectedClusters). The control plane writes both; users read.
import { Type, type Static } from "@sinclair/typebox";
import { OPERATOR_OBJECT_NAME } from "./api-group.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";
import {
  ALLOWED_TARGET_PATTERN,
  cel,
  Conditions,
  DnsLabel,
  EndpointUrl,
  Message,
  NonNegativeInt,
  ObservedGeneration,
  StringEnum,
  TARGET_KINDS,
  Timestamp,
} from "./schema-primitives.js";

/** Feature names the control plane may advertise; the schema accepts any CamelCase name so a newer control plane never fails on an older CRD. */
export const KNOWN_FEATURES = [
  "MultiClusterPrimary",
  "MultiClusterMember",
  "LayerReconnect",
  "DbBranching",
  "SqsQueueSplitting",
] as const;
export type KnownFeature = (typeof KNOWN_FEATURES)[number];

export const AUTH_TYPES = ["bearerToken", "eks", "mtls"] as const;

const VERSION_PATTERN = "^v?[0-9]+\\.[0-9]+\\.[0-9]+([-+][0-9A-Za-z.+-]+)?$";
const Version = (description: string) =>
  Type.String({ description, maxLength: 64, pattern: VERSION_PATTERN });

export const RemoteClusterSummary = Type.Object({
  name: DnsLabel("Cluster name (RFC 1123 label)."),
  server: Type.String({
    description: "API server URL of the remote cluster.",
    maxLength: 2048,
    pattern: "^https://[^\\s]+$",
  }),
  authType: StringEnum(AUTH_TYPES, {
    description: "How the Primary authenticates: bearerToken, eks or mtls.",
  }),
});

export const SwitchyardOperatorSpec = Type.Object(
  {
    clusterName: DnsLabel("Name of this cluster in the multi-cluster configuration."),
    defaultCluster: Type.Optional(
      DnsLabel("Cluster answering stateful operations (env, files, DNS, outgoing traffic)."),
    ),
    managementOnly: Type.Optional(
      Type.Boolean({
        description: "This Primary orchestrates only and hosts no child session.",
        default: false,
      }),
    ),
    multiCluster: Type.Optional(
      Type.Boolean({
        description:
          "Multi-cluster sessions are enabled; otherwise every session is a single ClusterSession.",
        default: false,
      }),
    ),
    clusters: Type.Optional(
      Type.Array(RemoteClusterSummary, {
        description: "Remote clusters this Primary reaches (no credentials).",
        maxItems: 64,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    allowList: Type.Optional(
      Type.Object(
        {
          namespaces: Type.Array(DnsLabel("A namespace sessions may use."), {
            description: "Namespaces sessions may use.",
            maxItems: 256,
            "x-kubernetes-list-type": "set",
          }),
          targetKinds: Type.Optional(
            Type.Array(StringEnum(TARGET_KINDS), {
              description: "Target kinds sessions may use (all when absent).",
              maxItems: TARGET_KINDS.length,
              "x-kubernetes-list-type": "set",
            }),
          ),
          targets: Type.Optional(
            Type.Array(
              Type.String({
                description:
                  "A target sessions may use, as <namespace>/<kind>/<name>; * in a part matches any run " +
                  "of characters within that part (e.g. shop/deployment/api-*, team-*/*/*).",
                minLength: 5,
                maxLength: 329,
                pattern: ALLOWED_TARGET_PATTERN,
              }),
              {
                description: "Targets sessions may use (all when absent); a session must match one.",
                maxItems: 256,
                "x-kubernetes-list-type": "set",
              },
            ),
          ),
        },
        {
          description:
            "Install-time bounds on what any session may touch. Informational: the control plane " +
            "enforces its own configuration, so editing this field widens nothing.",
        },
      ),
    ),
  },
  {
    description: "Summary of the operator's install-time configuration (no secrets).",
    ...cel(
      {
        rule: "!self.managementOnly || (has(self.defaultCluster) && self.defaultCluster != self.clusterName)",
        message: "managementOnly: true requires defaultCluster to name another cluster",
        fieldPath: ".defaultCluster",
      },
      {
        rule:
          "!has(self.defaultCluster) || self.defaultCluster == self.clusterName || " +
          "(has(self.clusters) && self.clusters.exists(c, c.name == self.defaultCluster))",
        message: "defaultCluster must name this cluster or one of spec.clusters",
        fieldPath: ".defaultCluster",
      },
    ),
  },
);

/** Most agent entries one cluster lists in status (counts stay exact beyond it). */
export const MAX_AGENT_ENTRIES = 100;

export const AgentEntry = Type.Object({
  namespace: DnsLabel("Namespace of the target."),
  target: Type.String({
    description: "The workload carrying the agent, as <kind>/<name> (deployment/… or statefulset/…).",
    maxLength: 300,
    pattern: "^(deployment|statefulset)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
  }),
  since: Type.Optional(
    Timestamp("When the agent went into the workload (template patch or first pod born with it)."),
  ),
  lingerUntil: Type.Optional(
    Type.String({
      description:
        "Set while no session uses the agent: when it is removed (RFC 3339), or never (until removed).",
      maxLength: 64,
    }),
  ),
  sessions: NonNegativeInt("Sessions on this cluster using the agent."),
  pods: NonNegativeInt("Pods of the target running the agent."),
  bornWithAgent: Type.Optional(
    Type.Boolean({
      description: "The workload opted in: its pods are born with the agent (admission webhook).",
    }),
  ),
});

export const AgentsSummary = Type.Object(
  {
    injected: NonNegativeInt("Workloads carrying the agent on this cluster, in use or not."),
    lingering: NonNegativeInt("Of those, workloads no session uses (the agent idles until lingerUntil)."),
    items: Type.Optional(
      Type.Array(AgentEntry, {
        description: `The workloads, at most ${MAX_AGENT_ENTRIES} (in use first, then by namespace and name).`,
        maxItems: MAX_AGENT_ENTRIES,
      }),
    ),
  },
  {
    description:
      "Sidecar agents this cluster's member keeps in workloads (in use by sessions or lingering idle), " +
      "from its watch caches.",
  },
);

export const ConnectedClusterStatus = Type.Object(
  {
    name: DnsLabel("Cluster name."),
    connected: Type.Optional(
      Type.Object(
        {
          kubernetesVersion: Type.String({
            description: "The cluster's /version gitVersion.",
            maxLength: 64,
          }),
          operatorVersion: Type.Optional(Version("Control-plane version running there.")),
          protocolVersion: Type.Optional(Version("Session protocol version spoken there.")),
        },
        { description: "Present while the cluster answers." },
      ),
    ),
    error: Type.Optional(Message("Why the last check failed.")),
    lastCheck: Timestamp("When the cluster was last checked."),
    latencyMs: Type.Optional(NonNegativeInt("Round trip of the last check, in milliseconds.")),
    agents: Type.Optional(AgentsSummary),
    credentialExpiresAt: Type.Optional(
      Timestamp("When the credential used for this cluster expires (token or client certificate)."),
    ),
  },
  {
    ...cel({
      rule: "has(self.connected) || has(self.error)",
      message: "a cluster entry reports either connected versions or an error",
    }),
  },
);

export const SwitchyardOperatorStatus = Type.Object(
  {
    operatorVersion: Type.Optional(Version("Version of the control plane.")),
    protocolVersion: Type.Optional(Version("Version of the session protocol the routers speak.")),
    supportedFeatures: Type.Optional(
      Type.Array(Type.String({ maxLength: 64, pattern: "^[A-Z][A-Za-z0-9]*$" }), {
        description: `Features this install supports, e.g. ${KNOWN_FEATURES.join(", ")}.`,
        maxItems: 32,
        "x-kubernetes-list-type": "set",
      }),
    ),
    defaultNamespace: Type.Optional(DnsLabel("Namespace the CLI uses when none is given.")),
    routerEndpoint: Type.Optional(EndpointUrl("URL the CLI connects to (the Primary's routers).")),
    connectedClusters: Type.Optional(
      Type.Array(ConnectedClusterStatus, {
        description: "Health of every remote cluster, one entry per cluster.",
        maxItems: 64,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    ),
    sessions: Type.Optional(
      Type.Object(
        {
          multiClusterSessions: NonNegativeInt(
            "Live MultiClusterSessions on this cluster, which it orchestrates as Primary; 0 where " +
              "the control plane runs in member mode only.",
          ),
          clusterSessions: NonNegativeInt(
            "Live ClusterSessions on this cluster, which its member serves: children of any " +
              "Primary and single-cluster sessions; 0 on a management-only Primary.",
          ),
        },
        {
          description:
            "Sessions this control plane serves. A session is live while it exists, is not being " +
            "deleted and has not Failed (phase Initializing, Pending, Ready or none yet). Written " +
            "by the leader from its watch caches within about a second of a change; absent until " +
            "those caches have synced.",
        },
      ),
    ),
    agents: Type.Optional(AgentsSummary),
    conditions: Type.Optional(Conditions()),
    observedGeneration: Type.Optional(ObservedGeneration()),
  },
  { description: "Observed state of the operator, written by the control plane." },
);

export type SwitchyardOperatorSpec = Static<typeof SwitchyardOperatorSpec>;
export type SwitchyardOperatorStatus = Static<typeof SwitchyardOperatorStatus>;
export type AgentsSummary = Static<typeof AgentsSummary>;
export type AgentEntry = Static<typeof AgentEntry>;
export type SwitchyardOperator = CustomResource<SwitchyardOperatorSpec, SwitchyardOperatorStatus>;

export const switchyardOperatorCrd = {
  kind: "SwitchyardOperator",
  plural: "switchyardoperators",
  singular: "switchyardoperator",
  shortNames: ["syop"],
  scope: "Cluster",
  description:
    "The Switchyard operator of this cluster: versions, supported features, router endpoint and " +
    `remote cluster health. A singleton named "${OPERATOR_OBJECT_NAME}".`,
  spec: SwitchyardOperatorSpec,
  status: SwitchyardOperatorStatus,
  rootRules: [
    {
      rule: `self.metadata.name == '${OPERATOR_OBJECT_NAME}'`,
      message: `SwitchyardOperator is a singleton: metadata.name must be "${OPERATOR_OBJECT_NAME}"`,
    },
  ],
  printerColumns: [
    { name: "Cluster", type: "string", jsonPath: ".spec.clusterName", description: "This cluster's name." },
    { name: "Default", type: "string", jsonPath: ".spec.defaultCluster", description: "Default cluster." },
    {
      name: "Version",
      type: "string",
      jsonPath: ".status.operatorVersion",
      description: "Control-plane version.",
    },
    {
      name: "Protocol",
      type: "string",
      jsonPath: ".status.protocolVersion",
      description: "Session protocol version.",
    },
    {
      name: "Ready",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].status',
      description: "Ready condition.",
    },
    {
      name: "Sessions",
      type: "integer",
      jsonPath: ".status.sessions.clusterSessions",
      description: "Sessions served here.",
      priority: 1,
    },
    {
      name: "Agents",
      type: "integer",
      jsonPath: ".status.agents.injected",
      description: "Workloads carrying the agent here.",
      priority: 1,
    },
    {
      name: "Lingering",
      type: "integer",
      jsonPath: ".status.agents.lingering",
      description: "Of those, idle (no session).",
      priority: 1,
    },
    {
      name: "Router",
      type: "string",
      jsonPath: ".status.routerEndpoint",
      description: "Router endpoint.",
      priority: 1,
    },
  ],
} satisfies CrdDefinition<typeof SwitchyardOperatorSpec, typeof SwitchyardOperatorStatus>;
