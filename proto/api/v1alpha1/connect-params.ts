// Connect parameters of a session: what the CLI asks for besides the target (database
// branches, SQS queue splitting, feature flags) and what the Primary adds for its
// children (every cluster's temporary output queues). Shared by MultiClusterSession and
// ClusterSession so a parent's parameters copy into a child without translation.
import { Type, type Static } from "@sinclair/typebox";
import { DNS_LABEL_PATTERN, DnsSubdomain, MapOf, StringEnum } from "./schema-primitives.js";

export const BRANCH_KINDS = ["PgBranchDatabase", "MysqlBranchDatabase"] as const;

/** An environment variable name, as containers and the agent accept it. */
export const ENV_VAR_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$";
// SQS queue names: letters, digits, hyphens, underscores (and `.fifo`), up to 80 characters.
const QUEUE_ID_PATTERN = "^[A-Za-z0-9_-]+(\\.fifo)?$";
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

export const SqsQueueSplit = Type.Object({
  queueId: Type.String({
    description: "Queue being split (SQS queue name).",
    minLength: 1,
    maxLength: 80,
    pattern: QUEUE_ID_PATTERN,
  }),
  messageFilter: MapOf(
    MESSAGE_ATTRIBUTE_PATTERN,
    Type.String({
      description: "Regular expression the attribute's value must match.",
      minLength: 1,
      maxLength: 1024,
    }),
    {
      description: "Message attribute name → regular expression; messages matching all go to the session.",
      minProperties: 1,
      maxProperties: 16,
      keyMaxLength: 256,
      // The API server compiles each value (RE2, as CEL's matches() does): a pattern that does not
      // compile fails this rule with the compiler's error, the field and this message.
      rules: [
        {
          rule: "self.all(k, ''.matches(self[k]) in [true, false])",
          message:
            "every value must be a regular expression in RE2 syntax (no backreferences or lookaround): " +
            "fix the pattern the error quotes",
        },
      ],
    },
  ),
});

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
            pattern: "^https://",
          }),
          { description: "Queue id → temporary output queue URL.", maxProperties: 16, keyMaxLength: 80 },
        ),
        {
          description: "Cluster → its temporary output queues (set by the Primary on every child).",
          maxProperties: 64,
          keyMaxLength: 63,
        },
      ),
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
