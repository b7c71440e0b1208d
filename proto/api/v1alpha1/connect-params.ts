// Connect parameters of a session: what the CLI asks for besides the target (database
// branches, SQS queue splitting, feature flags) and what the Primary adds for its
// children (every cluster's temporary output queues). Shared by MultiClusterSession and
// ClusterSession so a parent's parameters copy into a child without translation.
import { Type, type Static } from "@sinclair/typebox";
import { DNS_LABEL_PATTERN, DnsSubdomain, MapOf, StringEnum } from "./schema-primitives.js";

export const BRANCH_KINDS = ["PgBranchDatabase", "MysqlBranchDatabase"] as const;

/** An environment variable name, as containers and the agent accept it. */
export const ENV_VAR_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$";
// Queue ids, as SQS names queues: letters, digits, hyphens, underscores (and `.fifo`), up to 80 characters.
export const QUEUE_ID_PATTERN = "^[A-Za-z0-9_-]+(\\.fifo)?$";
const MESSAGE_ATTRIBUTE_PATTERN = "^[A-Za-z0-9_.-]+$";
const FLAG_PATTERN = "^[A-Za-z][A-Za-z0-9_.-]*$";

export const DatabaseBranchRef = Type.Object({
  envVar: Type.String({
    description: "Environment variable the Default cluster's agent rewrites to point at the branch.",
    minLength: 1,
    maxLength: 128,
    pattern: ENV_VAR_PATTERN,
  }),
  kind: StringEnum(BRANCH_KINDS, { description: "Kind of the branch custom resource." }),
  name: DnsSubdomain("Name of the branch custom resource, in the session's namespace."),
});

export const QUEUE_SPLIT_MODES = ["steal", "mirror"] as const;
export type QueueSplitMode = (typeof QUEUE_SPLIT_MODES)[number];

/** The CEL rule every filter regex map/list passes: the API server compiles it (RE2). */
const RE2_RULE_MESSAGE =
  "every value must be a regular expression in RE2 syntax (no backreferences or lookaround): " +
  "fix the pattern the error quotes";

/** A JSON body path: `$` then `.name`, `['name']` or `[index]` steps, e.g. `$.order.items[0].sku`. */
export const BODY_PATH_PATTERN = "^\\$((\\.[A-Za-z_][A-Za-z0-9_-]*)|(\\['[^'\\\\]+'\\])|(\\[[0-9]+\\]))*$";

export const BodyCondition = Type.Object({
  path: Type.String({
    description:
      "Where in the message's JSON body: `$` then `.name`, `['name']` or `[index]` steps, e.g. `$.order.tier`.",
    minLength: 1,
    maxLength: 256,
    pattern: BODY_PATH_PATTERN,
  }),
  matches: Type.String({
    description:
      "Regular expression (RE2) the value at `path` must match: strings as they are, numbers, booleans " +
      "and null as JSON text. A body that is not JSON, or has no value there, does not match.",
    minLength: 1,
    maxLength: 1024,
    "x-kubernetes-validations": [{ rule: "''.matches(self) in [true, false]", message: RE2_RULE_MESSAGE }],
  }),
});

export const SqsQueueSplit = Type.Object(
  {
    queueId: Type.String({
      description:
        "Queue being split: the id a QueueConsumer of the target gives it (each workload cluster reads " +
        "the queue's name or URL from the target's environment variable that QueueConsumer names).",
      minLength: 1,
      maxLength: 80,
      pattern: QUEUE_ID_PATTERN,
    }),
    messageFilter: Type.Optional(
      MapOf(
        MESSAGE_ATTRIBUTE_PATTERN,
        Type.String({
          description: "Regular expression the attribute's value must match.",
          minLength: 1,
          maxLength: 1024,
        }),
        {
          description:
            "Message attribute name → regular expression (RE2); a message matches when every attribute " +
            "named here is present and matches.",
          minProperties: 1,
          maxProperties: 16,
          keyMaxLength: 256,
          // The API server compiles each value (RE2, as CEL's matches() does): a pattern that does not
          // compile fails this rule with the compiler's error, the field and this message.
          rules: [{ rule: "self.all(k, ''.matches(self[k]) in [true, false])", message: RE2_RULE_MESSAGE }],
        },
      ),
    ),
    bodyFilter: Type.Optional(
      Type.Array(BodyCondition, {
        description: "Conditions on the JSON body, all of which must hold (besides messageFilter).",
        minItems: 1,
        maxItems: 8,
      }),
    ),
    mode: Type.Optional(
      StringEnum(QUEUE_SPLIT_MODES, {
        description:
          "steal: matching messages go to the session only; mirror: the session gets a copy and the " +
          "deployed consumers still get every message.",
        default: "steal",
      }),
    ),
  },
  {
    "x-kubernetes-validations": [
      {
        rule: "has(self.messageFilter) || has(self.bodyFilter)",
        message: "name messageFilter, bodyFilter or both: a split without a filter would take every message",
      },
    ],
  },
);

export const ConnectParams = Type.Object(
  {
    databaseBranches: Type.Optional(
      Type.Array(DatabaseBranchRef, {
        description: "Database branches the session uses (Default cluster only).",
        maxItems: 16,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["envVar"],
      }),
    ),
    sqsSplit: Type.Optional(
      Type.Array(SqsQueueSplit, {
        description: "SQS queues split between the session and the deployed consumers.",
        maxItems: 16,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["queueId"],
      }),
    ),
    outputQueues: Type.Optional(
      MapOf(
        DNS_LABEL_PATTERN,
        MapOf(
          QUEUE_ID_PATTERN,
          Type.String({
            description: "URL of the temporary output queue.",
            maxLength: 2048,
            pattern: "^https?://[^\\s]+$",
          }),
          { description: "Queue id → temporary output queue URL.", maxProperties: 16, keyMaxLength: 80 },
        ),
        {
          description:
            "Cluster → the session's output queues it made (set by the Primary on every child): each " +
            "cluster's splitter sends the messages the session's filter matches to these queues.",
          maxProperties: 64,
          keyMaxLength: 63,
        },
      ),
    ),
    releaseAgents: Type.Optional(
      Type.Boolean({
        description:
          "This session only removes the idle agents of its target (switchyard agents remove): every " +
          "workload cluster restores the target's template now, or once the sessions still using its " +
          "agents have ended; it provisions nothing and carries no traffic.",
      }),
    ),
    featureFlags: Type.Optional(
      MapOf(FLAG_PATTERN, Type.Boolean(), {
        description: "Feature flags the CLI requested (name → enabled).",
        maxProperties: 32,
        keyMaxLength: 63,
      }),
    ),
  },
  { description: "Parameters the session was opened with, beyond its target." },
);

export type ConnectParams = Static<typeof ConnectParams>;
export type DatabaseBranchRef = Static<typeof DatabaseBranchRef>;
export type SqsQueueSplit = Static<typeof SqsQueueSplit>;
export type BodyCondition = Static<typeof BodyCondition>;
