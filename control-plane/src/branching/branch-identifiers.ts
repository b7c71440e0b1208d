// Names and password of one branch on the database server: a database, a user (role) that
// owns it, and that user's password. Names are readable (`sy_` + the CR's name) and unique
// (a random suffix), so two branches of the same CR name, in two namespaces or one after
// another, never collide on a shared server. They are generated once per branch: the
// controller records them before creating anything, so a restart finds what it made by
// name instead of generating new ones.
import { randomBytes } from "node:crypto";
import { BRANCH_ENGINES, type BranchKind } from "../../../proto/api/v1alpha1/index.js";

export const BRANCH_NAME_PREFIX = "sy_";
/** Random suffix length: 12 characters of a 32-letter alphabet = 60 bits. */
export const BRANCH_SUFFIX_LENGTH = 12;
export const BRANCH_PASSWORD_LENGTH = 40;

/**
 * Longest generated user name. Postgres roles stop at 63 bytes; MariaDB users at 80 but
 * MySQL users at 32, and the MySQL kind serves both, so generated MySQL users stay at 32.
 */
export const GENERATED_USER_MAX_LENGTH: Record<BranchKind, number> = {
  PgBranchDatabase: 63,
  MysqlBranchDatabase: 32,
};

/** Longest database name: Postgres 63 bytes (NAMEDATALEN − 1), MySQL and MariaDB 64 characters. */
export const GENERATED_DATABASE_MAX_LENGTH: Record<BranchKind, number> = {
  PgBranchDatabase: BRANCH_ENGINES.PgBranchDatabase.databaseMaxLength,
  MysqlBranchDatabase: BRANCH_ENGINES.MysqlBranchDatabase.databaseMaxLength,
};

// 32 letters so one random byte's low 5 bits pick one without bias; no 0/1/8/9, which
// read like o/l/b/g in logs.
const SUFFIX_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567";
// Unreserved in URLs (RFC 3986) and inert in shells, SQL string literals and YAML: a
// password never needs quoting or percent-encoding anywhere it is written.
const PASSWORD_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

const GENERATED_NAME = /^[a-z][a-z0-9_]*$/;

export interface BranchIdentifiers {
  /** Database name on the server: `[a-z][a-z0-9_]*`, within the engine's limit. */
  database: string;
  /** User (role) owning the database; same suffix as the database, so the pair reads as one. */
  user: string;
  /** The user's password: 40 characters of [A-Za-z0-9] (≈ 238 bits). */
  password: string;
}

/** Random bytes; injectable so tests can force collisions and exact suffixes. */
export type RandomBytes = (size: number) => Uint8Array;

/**
 * The CR name reduced to `[a-z0-9_]`: lowercased, accents dropped, every other run of
 * characters one `_`, no `_` at either end. May be empty (a name of symbols only).
 */
export function sanitizeBranchLabel(crName: string): string {
  return crName
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
}

/** `sy_<label>_<suffix>` within `max` characters (the label is truncated, never the suffix). */
function composeName(label: string, suffix: string, max: number): string {
  const room = max - BRANCH_NAME_PREFIX.length - suffix.length - 1;
  const cut = label.slice(0, Math.max(0, room)).replace(/_+$/, "");
  return cut === "" ? `${BRANCH_NAME_PREFIX}${suffix}` : `${BRANCH_NAME_PREFIX}${cut}_${suffix}`;
}

function randomString(alphabet: string, length: number, random: RandomBytes): string {
  // Rejection sampling: only bytes below the largest multiple of the alphabet size are
  // used, so every character is equally likely.
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const b of random(length * 2)) {
      if (b >= limit) continue;
      out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A new password for a branch user (see PASSWORD_ALPHABET for why no symbols). */
export function generateBranchPassword(random: RandomBytes = randomBytes): string {
  return randomString(PASSWORD_ALPHABET, BRANCH_PASSWORD_LENGTH, random);
}

/** New identifiers for a branch of the CR `crName`, valid for the engine of `kind`. */
export function generateBranchIdentifiers(
  kind: BranchKind,
  crName: string,
  random: RandomBytes = randomBytes,
): BranchIdentifiers {
  const label = sanitizeBranchLabel(crName);
  const suffix = randomString(SUFFIX_ALPHABET, BRANCH_SUFFIX_LENGTH, random);
  return {
    database: composeName(label, suffix, GENERATED_DATABASE_MAX_LENGTH[kind]),
    user: composeName(label, suffix, GENERATED_USER_MAX_LENGTH[kind]),
    password: generateBranchPassword(random),
  };
}

/**
 * Whether `name` is one this module generates for `kind` (`sy_`, `[a-z0-9_]`, within the
 * limit): a provisioner checks a name read back from status before it reaches SQL, and
 * drops only databases and users that carry the prefix.
 */
export function isGeneratedBranchName(kind: BranchKind, name: string, what: "database" | "user"): boolean {
  const max = what === "database" ? GENERATED_DATABASE_MAX_LENGTH[kind] : GENERATED_USER_MAX_LENGTH[kind];
  return name.length <= max && name.startsWith(BRANCH_NAME_PREFIX) && GENERATED_NAME.test(name);
}
