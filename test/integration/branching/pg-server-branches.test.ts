// The Postgres `server` provisioner against real servers: a PostgreSQL 18 branch server that
// also holds a source (template copies: clone, trim per mode, ownership, idempotency) and a
// PostgreSQL 15 source on another server (streamed with Debian's pg_dump/psql 15).
import { readdirSync, readFileSync } from "node:fs";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BranchCopy } from "../../../proto/api/v1alpha1/index.js";
import { generateBranchIdentifiers } from "../../../control-plane/src/branching/branch-identifiers.js";
import type {
  BranchCreateRequest,
  BranchRef,
  ProvisionedBranch,
} from "../../../control-plane/src/branching/branch-provisioner.js";
import { parseSourceUrl } from "../../../control-plane/src/branching/connection-url.js";
import { planCopy } from "../../../control-plane/src/branching/copy-plan.js";
import { PgServerBranches } from "../../../control-plane/src/branching/postgres/pg-server-branches.js";
import { startPostgres, type PostgresServer } from "../../env/databases/postgres-server.js";
import { freePorts } from "../../env/ports.js";
import { eventually } from "../../support/poll.js";

const APP_PASSWORD = "app-source-password-1";
const TENANT_FILTERS: BranchCopy["filters"] = [
  { table: "users", where: "tenant = 1" },
  { table: "orders", where: "user_id IN (SELECT id FROM users WHERE tenant = 1)" },
];

let pg18: PostgresServer;
let pg15: PostgresServer;
let branches: PgServerBranches;
const logLines: string[] = [];

beforeAll(async () => {
  [pg18, pg15] = await Promise.all([startPostgres({ version: 18 }), startPostgres({ version: 15 })]);
  await Promise.all([seed(pg18), seed(pg15)]);
  branches = new PgServerBranches({
    adminUrl: pg18.adminUrl,
    // pg_dump and psql from PATH: Debian's PostgreSQL 15 client.
    logger: pino({ level: "info" }, { write: (line: string) => void logLines.push(line) }),
  });
}, 60_000);

afterAll(async () => {
  await Promise.all([pg18?.stop(), pg15?.stop()]);
});

/** A source database `shop` owned by `app` (not a superuser): users ← orders, an identity table, a view, a function. */
async function seed(server: PostgresServer): Promise<void> {
  await withClient(server.adminUrl, async (c) => {
    await c.query(`CREATE ROLE app LOGIN PASSWORD '${APP_PASSWORD}'`);
    await c.query("CREATE DATABASE shop OWNER app");
  });
  await withClient(sourceUrl(server), (c) =>
    c.query(`
      CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL, tenant int);
      CREATE TABLE orders (id serial PRIMARY KEY, user_id int NOT NULL REFERENCES users (id), total numeric NOT NULL);
      CREATE TABLE audit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text);
      CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 50;
      CREATE FUNCTION order_count(u int) RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM orders WHERE user_id = u';
      INSERT INTO users (name, tenant)
        SELECT 'user' || g, CASE WHEN g % 5 = 0 THEN NULL ELSE g % 3 END FROM generate_series(1, 30) g;
      INSERT INTO orders (user_id, total) SELECT 1 + g % 30, g FROM generate_series(1, 100) g;
      INSERT INTO audit (note) SELECT 'note' || g FROM generate_series(1, 10) g;`),
  );
}

function sourceUrl(server: PostgresServer, password = APP_PASSWORD, port = server.port): string {
  return `postgres://app:${password}@127.0.0.1:${port}/shop`;
}

async function withClient<T>(url: string | pg.ClientConfig, use: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(typeof url === "string" ? { connectionString: url } : url);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

function request(source: string, copy: BranchCopy, crName = "feature-x"): BranchCreateRequest {
  return {
    kind: "PgBranchDatabase",
    cr: { namespace: "dev", name: crName },
    copy: { mode: copy.mode ?? "schema", filters: copy.filters ?? [] },
    plan: planCopy(copy),
    source: parseSourceUrl("PgBranchDatabase", source, "the test's source"),
    identifiers: generateBranchIdentifiers("PgBranchDatabase", crName),
  };
}

const ref = (req: BranchCreateRequest): BranchRef => ({
  kind: req.kind,
  cr: req.cr,
  branchName: req.identifiers.database,
  user: req.identifiers.user,
});

const asBranchUser = (b: ProvisionedBranch) =>
  ({
    host: b.host,
    port: b.port,
    user: b.user,
    password: b.password,
    database: b.branchName,
  }) as pg.ClientConfig;

/** Row count and checksum of each table: the same before and after proves the source untouched. */
async function fingerprint(
  url: string | pg.ClientConfig,
  tables = ["users", "orders", "audit"],
): Promise<string[]> {
  return withClient(url, async (c) => {
    const out: string[] = [];
    for (const t of tables) {
      const { rows } = await c.query<{ n: number; sum: string }>(
        `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) AS sum FROM ${t} t`,
      );
      out.push(`${t}:${rows[0]!.n}:${rows[0]!.sum}`);
    }
    return out;
  });
}

async function count(url: string | pg.ClientConfig, sql: string): Promise<number> {
  return withClient(url, async (c) => Number((await c.query<{ n: string }>(sql)).rows[0]!.n));
}

/** Tables, views, sequences and functions of `public` that the connected user does not own. */
const NOT_MINE = `
  SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'S') AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user))
       + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'public' AND p.proowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)) AS n`;

function expectNoSecretLogged(...secrets: string[]): void {
  for (const s of [...secrets, APP_PASSWORD, new URL(pg18.adminUrl).password])
    expect(logLines.join("\n")).not.toContain(s);
}

/** psql and pg_dump processes whose parent is this test process. */
function childTools(): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && /^(psql|pg_dump|pg_wrapper|perl)$/.test(comm))
        found.push(`${comm}[${entry}]`);
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}

describe("same server (PostgreSQL 18): template copies", () => {
  it("all: a clone with every row, owned by the branch user, who alone may connect; the source untouched", async () => {
    const before = await fingerprint(sourceUrl(pg18));
    const req = request(sourceUrl(pg18), { mode: "all" });
    const branch = await branches.create(req, new AbortController().signal);
    expect(branch).toMatchObject({
      branchName: req.identifiers.database,
      user: req.identifiers.user,
      method: "clone",
    });
    expect({ host: branch.host, port: branch.port }).toEqual({ host: "127.0.0.1", port: pg18.port });
    expect(await fingerprint(asBranchUser(branch))).toEqual(before);
    expect(await count(asBranchUser(branch), NOT_MINE)).toBe(0);
    await withClient(asBranchUser(branch), (c) =>
      c.query("INSERT INTO users (name) VALUES ('written in the branch')"),
    );
    expect(await count(asBranchUser(branch), "SELECT count(*) AS n FROM users")).toBe(31);
    // The source's owner may not connect to the branch (CONNECT revoked from PUBLIC).
    await expect(
      withClient({ ...asBranchUser(branch), user: "app", password: APP_PASSWORD }, (c) =>
        c.query("SELECT 1"),
      ),
    ).rejects.toThrow(/permission denied for database/);
    expect(await fingerprint(sourceUrl(pg18))).toEqual(before);
    expectNoSecretLogged(branch.password);
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("schema with filters: matching rows kept (a NULL condition is not a match), others emptied, identities restarted", async () => {
    const before = await fingerprint(sourceUrl(pg18));
    const req = request(sourceUrl(pg18), { mode: "schema", filters: TENANT_FILTERS });
    const branch = await branches.create(req, new AbortController().signal);
    expect(branch.method).toBe("clone");
    const b = asBranchUser(branch);
    const tenantUsers = await count(sourceUrl(pg18), "SELECT count(*) AS n FROM users WHERE tenant = 1");
    expect(tenantUsers).toBeGreaterThan(0);
    expect(await count(b, "SELECT count(*) AS n FROM users")).toBe(tenantUsers);
    expect(await count(b, "SELECT count(*) AS n FROM users WHERE tenant IS DISTINCT FROM 1")).toBe(0);
    expect(
      await count(
        b,
        "SELECT count(*) AS n FROM orders o LEFT JOIN users u ON u.id = o.user_id WHERE u.id IS NULL",
      ),
    ).toBe(0);
    expect(await count(b, "SELECT count(*) AS n FROM orders")).toBeGreaterThan(0);
    expect(await count(b, "SELECT count(*) AS n FROM audit")).toBe(0);
    // audit was emptied with RESTART IDENTITY; users kept rows, so its sequence stays past them.
    await withClient(b, async (c) => {
      expect((await c.query("INSERT INTO audit (note) VALUES ('x') RETURNING id")).rows[0].id).toBe("1");
      expect((await c.query("INSERT INTO users (name) VALUES ('x') RETURNING id")).rows[0].id).toBe(31);
    });
    expect(await count(b, NOT_MINE)).toBe(0);
    expect(await fingerprint(sourceUrl(pg18))).toEqual(before);
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("empty with a filter: only the filtered table with its rows; other tables and their views gone, functions stay", async () => {
    const req = request(sourceUrl(pg18), {
      mode: "empty",
      filters: [{ table: "users", where: "tenant = 1" }],
    });
    const branch = await branches.create(req, new AbortController().signal);
    const b = asBranchUser(branch);
    const tables = await withClient(b, async (c) =>
      (
        await c.query(
          "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'v') ORDER BY 1",
        )
      ).rows.map((r: { relname: string }) => r.relname),
    );
    expect(tables).toEqual(["users"]);
    expect(await count(b, "SELECT count(*) AS n FROM users")).toBe(
      await count(sourceUrl(pg18), "SELECT count(*) AS n FROM users WHERE tenant = 1"),
    );
    expect(await count(b, "SELECT count(*) AS n FROM pg_proc WHERE proname = 'order_count'")).toBe(1);
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("create is idempotent; a branch without its completion mark is dropped and made again; drop twice", async () => {
    const req = request(sourceUrl(pg18), { mode: "schema" });
    const first = await branches.create(req, new AbortController().signal);
    expect(await branches.create(req, new AbortController().signal)).toEqual(first);
    // Half-made: the mark gone, something in it that a fresh branch would not have.
    await withClient(pg18.adminUrl, (c) => c.query(`COMMENT ON DATABASE ${first.branchName} IS NULL`));
    await withClient(asBranchUser(first), (c) => c.query("CREATE TABLE leftover (x int)"));
    const again = await branches.create(req, new AbortController().signal);
    expect(again).toEqual(first);
    expect(
      await count(asBranchUser(again), "SELECT count(*) AS n FROM pg_class WHERE relname = 'leftover'"),
    ).toBe(0);
    await branches.drop(ref(req), new AbortController().signal);
    await branches.drop(ref(req), new AbortController().signal);
    const left = await withClient(
      pg18.adminUrl,
      async (c) =>
        (
          await c.query(
            "SELECT (SELECT count(*) FROM pg_database WHERE datname = $1) + (SELECT count(*) FROM pg_roles WHERE rolname = $2) AS n",
            [first.branchName, first.user],
          )
        ).rows[0].n,
    );
    expect(Number(left)).toBe(0);
  });

  it("refuses to drop a name it does not generate", async () => {
    const err = await branches
      .drop(
        { kind: "PgBranchDatabase", cr: { namespace: "dev", name: "x" }, branchName: "shop", user: "app" },
        new AbortController().signal,
      )
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ terminal: true, reason: "NotABranchName" });
    expect(await count(pg18.adminUrl, "SELECT count(*) AS n FROM pg_database WHERE datname = 'shop'")).toBe(
      1,
    );
  });

  it("a source in use is streamed instead, never disconnected; pg_dump 15 cannot dump PostgreSQL 18: terminal, says the fix", async () => {
    const holder = new pg.Client({ connectionString: sourceUrl(pg18) });
    await holder.connect();
    try {
      const err = await branches
        .create(request(sourceUrl(pg18), { mode: "schema" }), new AbortController().signal)
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ terminal: true, reason: "PgDumpTooOld" });
      expect((err as Error).message).toMatch(/pg_dump 15 .*PostgreSQL 18 server.*pgBinDir/);
      expect(logLines.some((l) => l.includes("streaming the branch instead of a template copy"))).toBe(true);
      expect((await holder.query("SELECT 1 AS one")).rows[0].one).toBe(1);
    } finally {
      await holder.end();
    }
  });
});

describe("another server (PostgreSQL 15 source → 18): streamed with pg_dump | psql", () => {
  it("all: every row and sequence position, objects the branch user's; the source untouched", async () => {
    const before = await fingerprint(sourceUrl(pg15));
    const req = request(sourceUrl(pg15), { mode: "all" });
    const branch = await branches.create(req, new AbortController().signal);
    expect(branch.method).toBe("stream");
    expect(await fingerprint(asBranchUser(branch))).toEqual(before);
    expect(await count(asBranchUser(branch), NOT_MINE)).toBe(0);
    await withClient(asBranchUser(branch), async (c) => {
      expect((await c.query("INSERT INTO users (name) VALUES ('x') RETURNING id")).rows[0].id).toBe(31);
    });
    expect(await fingerprint(sourceUrl(pg15))).toEqual(before);
    expectNoSecretLogged(branch.password);
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("schema with filters on both ends of a foreign key: the rows, the constraint, sequences moved past them", async () => {
    const req = request(sourceUrl(pg15), { mode: "schema", filters: TENANT_FILTERS });
    const branch = await branches.create(req, new AbortController().signal);
    const b = asBranchUser(branch);
    const maxId = await count(sourceUrl(pg15), "SELECT max(id) AS n FROM users WHERE tenant = 1");
    expect(await count(b, "SELECT count(*) AS n FROM users")).toBe(
      await count(sourceUrl(pg15), "SELECT count(*) AS n FROM users WHERE tenant = 1"),
    );
    expect(await count(b, "SELECT count(*) AS n FROM orders")).toBe(
      await count(
        sourceUrl(pg15),
        "SELECT count(*) AS n FROM orders WHERE user_id IN (SELECT id FROM users WHERE tenant = 1)",
      ),
    );
    expect(await count(b, "SELECT count(*) AS n FROM audit")).toBe(0);
    expect(await count(b, "SELECT count(*) AS n FROM pg_constraint WHERE contype = 'f'")).toBe(1);
    await withClient(b, async (c) => {
      expect((await c.query("INSERT INTO users (name) VALUES ('x') RETURNING id")).rows[0].id).toBe(
        maxId + 1,
      );
      expect((await c.query("INSERT INTO audit (note) VALUES ('x') RETURNING id")).rows[0].id).toBe("1");
    });
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("empty with a filter: only the filtered table's schema and rows", async () => {
    const req = request(sourceUrl(pg15), {
      mode: "empty",
      filters: [{ table: "users", where: "tenant = 2" }],
    });
    const branch = await branches.create(req, new AbortController().signal);
    const b = asBranchUser(branch);
    expect(
      await count(
        b,
        "SELECT count(*) AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'",
      ),
    ).toBe(1);
    expect(await count(b, "SELECT count(*) AS n FROM users")).toBe(
      await count(sourceUrl(pg15), "SELECT count(*) AS n FROM users WHERE tenant = 2"),
    );
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("rows that reference rows not copied fail at their foreign key: terminal, says to filter the referenced table", async () => {
    const req = request(sourceUrl(pg15), {
      mode: "schema",
      filters: [{ table: "orders", where: "total > 90" }],
    });
    const err = await branches.create(req, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ terminal: true, reason: "CopyRejected" });
    expect((err as Error).message).toMatch(/foreign key.*filter the referenced tables too/s);
    await branches.drop(ref(req), new AbortController().signal);
  });

  it("an unreachable source is retried; a wrong password is terminal and never shown", async () => {
    const [closed] = await freePorts(1);
    const unreachable = await branches
      .create(
        request(sourceUrl(pg15, APP_PASSWORD, closed), { mode: "schema" }),
        new AbortController().signal,
      )
      .catch((e: unknown) => e);
    expect(unreachable).toMatchObject({ terminal: false, reason: "Unreachable" });
    expect((unreachable as Error).message).toMatch(
      /cannot connect to the source 127\.0\.0\.1:\d+\/shop as app/,
    );
    const wrong = "wrong-password-123";
    const refused = await branches
      .create(request(sourceUrl(pg15, wrong), { mode: "schema" }), new AbortController().signal)
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ terminal: true, reason: "ConnectionRefused" });
    expect((refused as Error).message).toMatch(/password authentication failed for user "app"/);
    expect((refused as Error).message).not.toContain(wrong);
    expectNoSecretLogged(wrong);
  });

  it("an abort mid-stream leaves no child process; the next create drops the half-made branch and makes it", async () => {
    // The filter sleeps on the source (once: an uncorrelated subquery), holding the rows step open.
    const slow = request(sourceUrl(pg15), {
      mode: "schema",
      filters: [{ table: "users", where: "(SELECT true FROM pg_sleep(60))" }],
    });
    const abort = new AbortController();
    const creating = branches.create(slow, abort.signal).catch((e: unknown) => e);
    await eventually(
      "psql copying the filtered rows",
      () => childTools().filter((c) => c.startsWith("psql")).length >= 2,
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    const reason = new Error("test abort");
    abort.abort(reason);
    expect(await creating).toBe(reason);
    expect(childTools()).toEqual([]);
    const again = await branches.create(
      { ...request(sourceUrl(pg15), { mode: "schema" }), identifiers: slow.identifiers },
      new AbortController().signal,
    );
    expect(again.branchName).toBe(slow.identifiers.database);
    expect(await count(asBranchUser(again), "SELECT count(*) AS n FROM users")).toBe(0);
    await branches.drop(ref(slow), new AbortController().signal);
  });
});
