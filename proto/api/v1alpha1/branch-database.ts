// PgBranchDatabase and MysqlBranchDatabase (MariaDB is served by the MySQL kind): a
// short-lived copy of a source database that sessions run against (DESIGN §7). The CLI
// creates the branch on the Primary; the Default cluster's branching controller creates
// the database, writes its credentials to a Secret and reports `status`. Both kinds are
// built here from one definition, so they differ only in names and engine limits.
// The spec is fixed at creation except `ttlSeconds`, which sessions extend while they use
// the branch: a different source, copy or target is a different branch.
import { Type, type Static } from "@sinclair/typebox";
import { ENV_VAR_PATTERN, type BRANCH_KINDS } from "./connect-params.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";
import {
  cel,
  Conditions,
  DnsLabel,
  DnsSubdomain,
  ObservedGeneration,
  StringEnum,
  TargetRef,
  Timestamp,
  type CelRule,
} from "./schema-primitives.js";

export type BranchKind = (typeof BRANCH_KINDS)[number];

export const COPY_MODES = ["empty", "schema", "all"] as const;
export type CopyMode = (typeof COPY_MODES)[number];

export const BRANCH_DATABASE_PHASES = ["Pending", "Ready", "Failed"] as const;
export type BranchDatabasePhase = (typeof BRANCH_DATABASE_PHASES)[number];

// Branches outlive a session's TTL (a restarted CLI finds its data again), and sessions
// extend them while they use them; a day bounds what a forgotten branch costs.
export const BRANCH_TTL_SECONDS_DEFAULT = 300;
export const BRANCH_TTL_SECONDS_MIN = 30;
export const BRANCH_TTL_SECONDS_MAX = 86400;

/** Names and limits of one engine's kind. */
export interface BranchEngine {
  kind: BranchKind;
  plural: string;
  singular: string;
  shortNames: string[];
  /** Human name used in descriptions. */
  product: string;
  /** Port used when an explicit source names none. */
  defaultPort: number;
  /** Longest database name the server accepts. */
  databaseMaxLength: number;
  /** Longest user name the server accepts. */
  userMaxLength: number;
}

/** Per kind: names (the chart's RBAC spells the same plurals) and engine limits. */
export const BRANCH_ENGINES = {
  PgBranchDatabase: {
    kind: "PgBranchDatabase",
    plural: "pgbranchdatabases",
    singular: "pgbranchdatabase",
    shortNames: ["pgbranch", "pgb"],
    product: "PostgreSQL",
    defaultPort: 5432,
    databaseMaxLength: 63,
    userMaxLength: 63,
  },
  MysqlBranchDatabase: {
    kind: "MysqlBranchDatabase",
    plural: "mysqlbranchdatabases",
    singular: "mysqlbranchdatabase",
    shortNames: ["mysqlbranch", "myb"],
    product: "MySQL or MariaDB",
    defaultPort: 3306,
    databaseMaxLength: 64,
    // MariaDB's limit; MySQL itself stops at 32 and refuses longer names when connecting.
    userMaxLength: 80,
  },
} as const satisfies Record<BranchKind, BranchEngine>;

// Identifiers that reach SQL statements: plain characters only, so they never need quoting
// rules that differ between engines.
export const DATABASE_IDENTIFIER_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_$-]*$";
const USER_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.$-]*$";
// `table` or `schema.table`.
export const TABLE_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_$]*(\\.[A-Za-z_][A-Za-z0-9_$]*)?$";
const HOST_PATTERN = "^[A-Za-z0-9.:_-]+$";
// A Secret's data key.
const SECRET_KEY_PATTERN = "^[-._a-zA-Z0-9]+$";

const FILTERS_MAX_ITEMS = 32;
const WHERE_MAX_LENGTH = 4096;

const EXPLICIT_FIELDS = ["host", "port", "database", "user", "passwordSecretRef"] as const;

function sourceSchema(engine: BranchEngine) {
  const anyExplicit = EXPLICIT_FIELDS.map((f) => `has(self.${f})`).join(" || ");
  return Type.Object(
    {
      fromEnv: Type.Optional(
        Type.Object(
          {
            name: Type.String({
              description: "Environment variable of the target container holding the URL, e.g. DATABASE_URL.",
              minLength: 1,
              maxLength: 128,
              pattern: ENV_VAR_PATTERN,
            }),
          },
          { description: "Read the source connection URL from the target container's environment." },
        ),
      ),
      host: Type.Optional(
        Type.String({
          description: "Host name or IP address of the source server.",
          minLength: 1,
          maxLength: 253,
          pattern: HOST_PATTERN,
        }),
      ),
      port: Type.Optional(
        Type.Integer({
          description: `Port of the source server. Default ${engine.defaultPort}.`,
          minimum: 1,
          maximum: 65535,
          format: "int32",
        }),
      ),
      database: Type.Optional(
        Type.String({
          description: "Source database to branch from.",
          minLength: 1,
          maxLength: engine.databaseMaxLength,
          pattern: DATABASE_IDENTIFIER_PATTERN,
        }),
      ),
      user: Type.Optional(
        Type.String({
          description: "User to connect as.",
          minLength: 1,
          maxLength: engine.userMaxLength,
          pattern: USER_PATTERN,
        }),
      ),
      passwordSecretRef: Type.Optional(
        Type.Object(
          {
            name: DnsSubdomain("Secret in the branch's namespace."),
            key: Type.String({
              description: "Key of the Secret's data holding the password.",
              minLength: 1,
              maxLength: 253,
              pattern: SECRET_KEY_PATTERN,
            }),
          },
          {
            description: "Secret key holding the user's password (a password is never written in the spec).",
          },
        ),
      ),
    },
    {
      description:
        "Where the source connection comes from: exactly one of fromEnv or the explicit fields " +
        "(host, database, user; port and passwordSecretRef optional).",
      ...cel(
        {
          rule: `has(self.fromEnv) != (${anyExplicit})`,
          message:
            "set exactly one of spec.source.fromEnv or the explicit fields (spec.source.host, port, " +
            "database, user, passwordSecretRef)",
        },
        {
          rule: "has(self.fromEnv) || (has(self.host) && has(self.database) && has(self.user))",
          message:
            "an explicit source needs spec.source.host, spec.source.database and spec.source.user " +
            "(port and passwordSecretRef are optional), or use spec.source.fromEnv instead",
        },
      ),
    },
  );
}

export const TableFilter = Type.Object({
  table: Type.String({
    description: "Table whose matching rows are copied: `table` or `schema.table`.",
    minLength: 1,
    maxLength: 129,
    pattern: TABLE_NAME_PATTERN,
  }),
  where: Type.String({
    description: "SQL condition selecting the rows to copy, e.g. `tenant_id = 42` (one expression, no `;`).",
    minLength: 1,
    maxLength: WHERE_MAX_LENGTH,
    pattern: "^[^;]+$",
  }),
});

export const BranchCopy = Type.Object(
  {
    mode: Type.Optional(
      StringEnum(COPY_MODES, {
        description:
          "empty: database only; schema: tables without rows; all: schema and every row. Default schema.",
        default: "schema",
      }),
    ),
    filters: Type.Optional(
      Type.Array(TableFilter, {
        description: "Rows copied on top of modes empty and schema, one filter per table.",
        minItems: 1,
        maxItems: FILTERS_MAX_ITEMS,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["table"],
      }),
    ),
  },
  {
    description: "What is copied from the source.",
    // `{}` lets the API server fill in mode when copy is left out.
    default: {},
    ...cel({
      rule: "!has(self.filters) || !has(self.mode) || self.mode != 'all'",
      message:
        "spec.copy.filters is only allowed with spec.copy.mode empty or schema (all copies every row): " +
        "remove spec.copy.filters or change the mode",
      fieldPath: ".filters",
    }),
  },
);

/** `self == oldSelf` for an optional field: adding or removing it is a change too. */
function unchanged(field: string): CelRule {
  return {
    rule: `has(self.${field}) == has(oldSelf.${field}) && (!has(self.${field}) || self.${field} == oldSelf.${field})`,
    message: `spec.${field} is immutable (only spec.ttlSeconds may change): delete the branch and create a new one`,
    fieldPath: `.${field}`,
  };
}

function specSchema(engine: BranchEngine) {
  return Type.Object(
    {
      target: TargetRef({
        description:
          "Workload whose database is branched: `deployment/<name>`, `statefulset/<name>` or " +
          "`pod/<name>`, optionally followed by `/container/<container>`. Resolved in the Default cluster.",
      }),
      source: sourceSchema(engine),
      copy: Type.Optional(BranchCopy),
      ttlSeconds: Type.Optional(
        Type.Integer({
          description:
            "Seconds the branch lives without a session using it; sessions extend it. " +
            `Default ${BRANCH_TTL_SECONDS_DEFAULT}, from ${BRANCH_TTL_SECONDS_MIN} to ${BRANCH_TTL_SECONDS_MAX}.`,
          minimum: BRANCH_TTL_SECONDS_MIN,
          maximum: BRANCH_TTL_SECONDS_MAX,
          default: BRANCH_TTL_SECONDS_DEFAULT,
          format: "int32",
        }),
      ),
      id: Type.Optional(
        DnsLabel("Branch id: sessions naming the same id in this namespace share the branch."),
      ),
    },
    {
      description: `A branch of a ${engine.product} database. Immutable except ttlSeconds.`,
      ...cel(...["target", "source", "copy", "id"].map(unchanged)),
    },
  );
}

function statusSchema(engine: BranchEngine) {
  return Type.Object(
    {
      phase: Type.Optional(
        StringEnum(BRANCH_DATABASE_PHASES, { description: "Pending → Ready, or Failed." }),
      ),
      branchName: Type.Optional(
        Type.String({
          description: "Name of the branch database on the server.",
          minLength: 1,
          maxLength: engine.databaseMaxLength,
          pattern: DATABASE_IDENTIFIER_PATTERN,
        }),
      ),
      expiresAt: Type.Optional(Timestamp("When the branch is deleted unless a session extends it.")),
      secretName: Type.Optional(
        DnsSubdomain("Secret in this namespace holding the branch's connection credentials."),
      ),
      sessions: Type.Optional(
        Type.Array(DnsSubdomain("A session using the branch."), {
          description: "Sessions currently using the branch.",
          maxItems: 64,
          "x-kubernetes-list-type": "set",
        }),
      ),
      conditions: Type.Optional(Conditions()),
      observedGeneration: Type.Optional(ObservedGeneration()),
    },
    {
      description: "Observed state, written by the branching controller (never credentials).",
      ...cel({
        rule: "!has(self.phase) || self.phase != 'Ready' || (has(self.branchName) && has(self.secretName))",
        message: "a Ready branch must name its branchName and secretName",
        fieldPath: ".phase",
      }),
    },
  );
}

function branchDatabaseCrd<E extends BranchEngine>(engine: E) {
  const spec = specSchema(engine);
  const status = statusSchema(engine);
  return {
    kind: engine.kind,
    plural: engine.plural,
    singular: engine.singular,
    shortNames: [...engine.shortNames],
    scope: "Namespaced",
    description:
      `A short-lived branch of a ${engine.product} database for sessions to use, created on the ` +
      "Primary and provisioned in the Default cluster; credentials are in the Secret status.secretName.",
    spec,
    status,
    printerColumns: [
      { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Lifecycle phase." },
      {
        name: "Branch",
        type: "string",
        jsonPath: ".status.branchName",
        description: "Database name on the server.",
      },
      { name: "Target", type: "string", jsonPath: ".spec.target", description: "Target of the branch." },
      {
        name: "Expires",
        type: "date",
        jsonPath: ".status.expiresAt",
        description: "When the branch expires unless extended.",
      },
    ],
  } satisfies CrdDefinition<typeof spec, typeof status>;
}

export const pgBranchDatabaseCrd = branchDatabaseCrd(BRANCH_ENGINES.PgBranchDatabase);
export const mysqlBranchDatabaseCrd = branchDatabaseCrd(BRANCH_ENGINES.MysqlBranchDatabase);

export const PgBranchDatabaseSpec = pgBranchDatabaseCrd.spec;
export const PgBranchDatabaseStatus = pgBranchDatabaseCrd.status;
export const MysqlBranchDatabaseSpec = mysqlBranchDatabaseCrd.spec;
export const MysqlBranchDatabaseStatus = mysqlBranchDatabaseCrd.status;

/** Both kinds share one shape; only the limits the API server checks differ. */
export type BranchDatabaseSpec = Static<typeof PgBranchDatabaseSpec>;
export type BranchDatabaseStatus = Static<typeof PgBranchDatabaseStatus>;
export type BranchSource = BranchDatabaseSpec["source"];
export type BranchCopy = Static<typeof BranchCopy>;
export type TableFilter = Static<typeof TableFilter>;
export type BranchDatabase = CustomResource<BranchDatabaseSpec, BranchDatabaseStatus>;

export type PgBranchDatabaseSpec = BranchDatabaseSpec;
export type PgBranchDatabaseStatus = BranchDatabaseStatus;
export type PgBranchDatabase = BranchDatabase;
export type MysqlBranchDatabaseSpec = Static<typeof MysqlBranchDatabaseSpec>;
export type MysqlBranchDatabaseStatus = Static<typeof MysqlBranchDatabaseStatus>;
export type MysqlBranchDatabase = CustomResource<MysqlBranchDatabaseSpec, MysqlBranchDatabaseStatus>;
