// The Secret holding a database branch's credentials (DESIGN §7): written by the branching
// controller in the Default cluster beside the branch CR (owned by it), copied to the
// Primary by the sync controller, read by the CLI. Its name is the CR's status.secretName;
// the credentials never appear in the CR, a log line or a metric.
import { createHash } from "node:crypto";
import { GROUP } from "./api-group.js";
import type { BranchKind } from "./branch-database.js";

/** `type` of every branch Secret. */
export const BRANCH_SECRET_TYPE = `${GROUP}/database-branch`;
/** Label naming the branch CR (`<kind>.<name>`, lowercased kind) on its Secret. */
export const BRANCH_SECRET_LABEL = `${GROUP}/branch`;

/** The Secret's data keys. `url` is the full connection URL from inside the Default cluster. */
export const BRANCH_SECRET_KEYS = ["host", "port", "database", "user", "password", "url"] as const;
export type BranchSecretKey = (typeof BRANCH_SECRET_KEYS)[number];
export type BranchCredentials = Record<BranchSecretKey, string>;

const SECRET_NAME_MAX = 253;

/**
 * Name of the Secret of branch CR `name` of `kind`: `<name>-pgbranch` or `<name>-mysqlbranch`,
 * shortened with a hash suffix when that would exceed a Secret name's 253 characters.
 */
export function branchSecretName(kind: BranchKind, name: string): string {
  const suffix = kind === "PgBranchDatabase" ? "-pgbranch" : "-mysqlbranch";
  const plain = `${name}${suffix}`;
  if (plain.length <= SECRET_NAME_MAX) return plain;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 10);
  return `${name.slice(0, SECRET_NAME_MAX - suffix.length - hash.length - 1).replace(/[-.]+$/, "")}-${hash}${suffix}`;
}

/** The Secret's `data` (base64) for `credentials`. */
export function branchSecretData(credentials: BranchCredentials): Record<string, string> {
  const data: Record<string, string> = {};
  for (const k of BRANCH_SECRET_KEYS) data[k] = Buffer.from(credentials[k], "utf8").toString("base64");
  return data;
}

/** Reads a branch Secret's `data`; undefined when a key is missing (a Secret still being written). */
export function readBranchSecretData(
  data: Record<string, string> | undefined,
): BranchCredentials | undefined {
  if (!data) return undefined;
  const out: Partial<BranchCredentials> = {};
  for (const k of BRANCH_SECRET_KEYS) {
    const v = data[k];
    if (typeof v !== "string") return undefined;
    out[k] = Buffer.from(v, "base64").toString("utf8");
  }
  return out as BranchCredentials;
}
