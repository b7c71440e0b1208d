// The branch's login role on the Postgres branch server: made with its password as a
// SCRAM-SHA-256 verifier computed here (what psql's \password does), so the password
// itself never reaches the server, its statement log or pg_stat_activity; allowed to
// connect to its own branch only; the owner of the branch database and of everything in
// it. Ownership is moved object by object inside the branch (ALTER … OWNER TO): REASSIGN
// OWNED would also move what the old owner owns outside the branch — the source database
// itself among it. Dropping ends only the sessions of the branch's own database.
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { pgQuoteIdentifier } from "./pg-copy-commands.js";
import type { PgSession } from "./pg-session.js";

const SCRAM_ITERATIONS = 4096;

/**
 * The SCRAM-SHA-256 verifier Postgres stores for `password` (RFC 7677, as libpq's
 * PQencryptPasswordConn): `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
 * Generated passwords are ASCII letters and digits, which SASLprep leaves as they are.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16)): string {
  const salted = pbkdf2Sync(password, salt, SCRAM_ITERATIONS, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  const b64 = (b: Buffer) => b.toString("base64");
  return `SCRAM-SHA-256$${SCRAM_ITERATIONS}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}

/**
 * Creates the branch's login role. An admin that is not a superuser (CREATEDB and
 * CREATEROLE) makes itself a member, which CREATE DATABASE … OWNER and ALTER … OWNER
 * TO the role require.
 */
export async function createBranchRole(
  admin: PgSession,
  user: string,
  password: string,
  adminIsSuperuser: boolean,
): Promise<void> {
  const role = pgQuoteIdentifier(user);
  // The verifier is base64 and `$:`: nothing in it needs escaping in a string literal.
  await admin.query(
    `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS ` +
      `PASSWORD '${scramVerifier(password)}'`,
  );
  if (!adminIsSuperuser) await admin.query(`GRANT ${role} TO CURRENT_USER`);
}

/** Only the owner (and superusers) may connect to the branch: PUBLIC's default CONNECT goes. */
export async function restrictConnect(admin: PgSession, database: string): Promise<void> {
  await admin.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${pgQuoteIdentifier(database)} FROM PUBLIC`);
}

/**
 * Drops the branch database (ending the sessions connected to it, and only those) and its
 * role. Either being absent is fine.
 */
export async function dropBranch(
  admin: PgSession,
  database: string,
  user: string,
  serverVersionNum: number,
): Promise<void> {
  await admin.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    [database],
  );
  // WITH (FORCE) (PostgreSQL 13) ends sessions that connected after the line above.
  const force = serverVersionNum >= 130_000 ? " WITH (FORCE)" : "";
  await admin.query(`DROP DATABASE IF EXISTS ${pgQuoteIdentifier(database)}${force}`);
  await admin.query(`DROP ROLE IF EXISTS ${pgQuoteIdentifier(user)}`);
}

// Catalogs of objects that have an owner and that a database template copies. Left out on
// purpose: event triggers and foreign-data wrappers (their owner must be a superuser),
// indexes and TOAST tables (they follow their table), table row types and array types
// (they follow their table or element type), owned and identity sequences (they follow
// their table).
const OWNED_OBJECTS = `
  SELECT 'pg_namespace'::regclass AS classid, oid AS objid FROM pg_namespace
  UNION ALL SELECT 'pg_class'::regclass, c.oid FROM pg_class c
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
       OR (c.relkind = 'S' AND NOT EXISTS (
             SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
               AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
  UNION ALL SELECT 'pg_proc'::regclass, oid FROM pg_proc
  UNION ALL SELECT 'pg_type'::regclass, t.oid FROM pg_type t
    WHERE t.typtype IN ('b', 'd', 'e', 'r') AND t.typrelid = 0
      AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid)
  UNION ALL SELECT 'pg_collation'::regclass, oid FROM pg_collation
  UNION ALL SELECT 'pg_conversion'::regclass, oid FROM pg_conversion
  UNION ALL SELECT 'pg_operator'::regclass, oid FROM pg_operator
  UNION ALL SELECT 'pg_opclass'::regclass, oid FROM pg_opclass
  UNION ALL SELECT 'pg_opfamily'::regclass, oid FROM pg_opfamily
  UNION ALL SELECT 'pg_ts_dict'::regclass, oid FROM pg_ts_dict
  UNION ALL SELECT 'pg_ts_config'::regclass, oid FROM pg_ts_config
  UNION ALL SELECT 'pg_statistic_ext'::regclass, oid FROM pg_statistic_ext
  UNION ALL SELECT 'pg_foreign_server'::regclass, oid FROM pg_foreign_server
  UNION ALL SELECT 'pg_publication'::regclass, oid FROM pg_publication
  UNION ALL SELECT 'pg_language'::regclass, oid FROM pg_language
  UNION ALL SELECT 'pg_largeobject_metadata'::regclass, oid FROM pg_largeobject_metadata`;

// pg_identify_object's type → the ALTER command's object keyword.
const ALTER_KEYWORD: Readonly<Record<string, string>> = {
  schema: "SCHEMA",
  table: "TABLE",
  view: "VIEW",
  "materialized view": "MATERIALIZED VIEW",
  "foreign table": "FOREIGN TABLE",
  "composite type": "TYPE",
  sequence: "SEQUENCE",
  function: "FUNCTION",
  procedure: "PROCEDURE",
  aggregate: "AGGREGATE",
  type: "TYPE",
  domain: "DOMAIN",
  collation: "COLLATION",
  conversion: "CONVERSION",
  operator: "OPERATOR",
  "operator class": "OPERATOR CLASS",
  "operator family": "OPERATOR FAMILY",
  "text search dictionary": "TEXT SEARCH DICTIONARY",
  "text search configuration": "TEXT SEARCH CONFIGURATION",
  "statistics object": "STATISTICS",
  server: "SERVER",
  publication: "PUBLICATION",
  language: "LANGUAGE",
  "large object": "LARGE OBJECT",
};

/**
 * On a session connected to the branch (as the admin): makes `user` the owner of every
 * object made after initdb (OID ≥ 16384) that is not part of an extension. Returns the
 * number of objects moved and the object types it has no ALTER for (left as they are).
 */
export async function giveObjectsTo(
  branch: PgSession,
  user: string,
): Promise<{ moved: number; skipped: string[] }> {
  const rows = await branch.query<{ type: string; identity: string }>(
    `WITH objs AS (${OWNED_OBJECTS})
     SELECT i.type, i.identity
       FROM objs o, LATERAL pg_identify_object(o.classid, o.objid, 0) i
      WHERE o.objid >= 16384
        AND NOT EXISTS (SELECT 1 FROM pg_depend e
                         WHERE e.classid = o.classid AND e.objid = o.objid AND e.deptype = 'e')
      ORDER BY i.type, i.identity`,
  );
  const role = pgQuoteIdentifier(user);
  const statements: string[] = [];
  const skipped = new Set<string>();
  for (const { type, identity } of rows) {
    const keyword = ALTER_KEYWORD[type];
    if (keyword === undefined) skipped.add(type);
    else statements.push(`ALTER ${keyword} ${identity} OWNER TO ${role}`);
  }
  // One simple-protocol query: one round trip, one implicit transaction.
  if (statements.length > 0) await branch.query(statements.join(";\n"));
  return { moved: statements.length, skipped: [...skipped] };
}
