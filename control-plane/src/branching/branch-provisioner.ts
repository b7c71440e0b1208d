// The seam between the branching controllers and the ways a branch database is made
// (DESIGN §7): `server` (a database on a shared Postgres/MySQL-compatible server: template
// copy or clone where the server can, else the copy plan streamed from the source) and
// `pod` (a database pod per branch). Controllers own the CR, its Secret and its status;
// a provisioner owns only what it makes on a server or in a cluster.
//
// Idempotency: a controller may call `create` again at any time — after a restart in the
// middle of a copy, after a timeout, after an abort. The identifiers are generated once
// and recorded before the first call, so `create` finds what it made by those names. It
// marks a branch complete only after the last step (e.g. a comment on the database): a
// complete branch is returned as it is; a half-made one is dropped and made again, never
// topped up. `drop` of a branch that is not
// there succeeds. Neither ever touches a database or user whose name is not a generated
// branch name (branch-identifiers.ts `isGeneratedBranchName`).
//
// Errors: an error whose `terminal` property is true (bad source credentials, a filter the
// source rejects, a missing table) is recorded on the CR as Failed and not retried; any
// other is retried with backoff. Messages never contain a password.
import type { BranchKind, CopyMode, TableFilter } from "../../../proto/api/v1alpha1/index.js";
import type { BranchIdentifiers } from "./branch-identifiers.js";
import type { SourceDatabase } from "./connection-url.js";
import type { CopyStep } from "./copy-plan.js";

export interface BranchCreateRequest {
  /** The CR's kind: the engine (PgBranchDatabase = Postgres, MysqlBranchDatabase = MySQL/MariaDB). */
  kind: BranchKind;
  /**
   * The CR, for labels and messages: `namespace/name`; `uid` for the ownerReferences of
   * objects a provisioner makes in the cluster (the `pod` provisioner's Pod and Service).
   */
  cr: { namespace: string; name: string; uid?: string };
  /** spec.copy as the CR says it (mode defaulted), for provisioners that copy without the plan. */
  copy: { mode: CopyMode; filters: readonly TableFilter[] };
  /** The ordered steps (copy-plan.ts), already checked. */
  plan: readonly CopyStep[];
  /** Where to copy from, the password resolved (from the URL or spec.source.passwordSecretRef). */
  source: SourceDatabase;
  /** The branch's database, user and password, generated once and recorded by the controller. */
  identifiers: BranchIdentifiers;
}

/** A branch that is ready: what its Secret holds and the connection URL is built from. */
export interface ProvisionedBranch {
  /** Database name on the server (status.branchName). */
  branchName: string;
  /** Where clients reach it from inside the Default cluster. */
  host: string;
  port: number;
  user: string;
  password: string;
  /**
   * How the `server` provisioner made it: `clone` (a template copy sharing the source's
   * files, PostgreSQL 18 file_copy_method = clone), `template` (a template copy), `stream`
   * (the copy plan streamed from the source). Undefined for other provisioners.
   */
  method?: "clone" | "template" | "stream";
}

/** What `drop` needs: the names recorded for the branch (never a password). */
export interface BranchRef {
  kind: BranchKind;
  cr: { namespace: string; name: string };
  branchName: string;
  user: string;
}

export interface BranchProvisioner {
  /** The provisioner's name as configured. */
  readonly name: "server" | "pod";
  /**
   * Makes the branch, or returns the one already made under `request.identifiers`.
   * Resolves once the copy is complete and the user can log in; rejects on abort.
   */
  create(request: BranchCreateRequest, signal: AbortSignal): Promise<ProvisionedBranch>;
  /** Removes the branch's database and user; resolves when they are gone or were never there. */
  drop(branch: BranchRef, signal: AbortSignal): Promise<void>;
  /** One line for start-up logs: the provisioner and where it makes branches (no secrets). */
  describe(): string;
}
