// The MySQL/MariaDB `server` provisioner against two real MariaDB servers: `home` holds the
// source database and is also a branch server (the server copies itself), `other` is a
// branch server the source is streamed to with mariadb-dump | mariadb.
import { readdirSync, readFileSync } from "node:fs";
import mysql, { type Connection, type RowDataPacket } from "mysql2/promise";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BranchCopy } from "../../../proto/api/v1alpha1/index.js";
import { generateBranchIdentifiers } from "../../../control-plane/src/branching/branch-identifiers.js";
import type {
  BranchCreateRequest,
  BranchRef,
  ProvisionedBranch,
} from "../../../control-plane/src/branching/branch-provisioner.js";
import type { SourceDatabase } from "../../../control-plane/src/branching/connection-url.js";
import { planCopy } from "../../../control-plane/src/branching/copy-plan.js";
import { MysqlServerBranches } from "../../../control-plane/src/branching/mysql/mysql-server-branches.js";
import { startMariadb, type MariadbServer } from "../../env/databases/mariadb-server.js";
import { eventually } from "../../support/poll.js";

// Everything an option file has to quote: a comment sign, quotes, a backslash, a space.
const APP_PASSWORD = `app#pw "x" \\ y'z`;
const TABLES = ["audit", "customers", "orders"];
const TENANT_FILTERS: BranchCopy["filters"] = [
  { table: "customers", where: "tenant = 1" },
  { table: "orders", where: "customer_id IN (SELECT id FROM customers WHERE tenant = 1)" },
];

const servers: MariadbServer[] = [];
let home: MariadbServer;
let other: MariadbServer;
let onHome: MysqlServerBranches;
let onOther: MysqlServerBranches;
let sourceChecksums: string;
let sourceContents: string;
const logLines: string[] = [];
const made: { provisioner: MysqlServerBranches; ref: BranchRef }[] = [];

beforeAll(async () => {
  // Both started at once; one that started is stopped even when the other failed.
  const started = await Promise.allSettled(
    ["mariadb-home", "mariadb-other"].map((name) => startMariadb({ name })),
  );
  for (const s of started) if (s.status === "fulfilled") servers.push(s.value);
  for (const s of started) if (s.status === "rejected") throw s.reason;
  [home, other] = servers as [MariadbServer, MariadbServer];
  await seed();
  const logger = pino({ level: "debug" }, { write: (line: string) => void logLines.push(line) });
  onHome = new MysqlServerBranches({ adminUrl: home.adminUrl, serverAliases: ["localhost"], logger });
  onOther = new MysqlServerBranches({ adminUrl: other.adminUrl, logger });
  sourceChecksums = await checksums(home, "shop");
  sourceContents = await contents(home, "shop");
}, 60_000);

afterEach(async () => {
  for (const { provisioner, ref } of made.splice(0))
    await provisioner.drop(ref, new AbortController().signal);
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

/** `shop`, owned by `app` (ALL on shop.*, nothing else): customers ← orders (with a generated column), audit, a view, a trigger, a routine, an event. */
async function seed(): Promise<void> {
  await withConnection(home, undefined, async (c) => {
    await c.query("CREATE DATABASE shop CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci");
    await c.query("CREATE USER 'app'@'%' IDENTIFIED BY ?", [APP_PASSWORD]);
    await c.query("GRANT ALL PRIVILEGES ON shop.* TO 'app'@'%'");
  });
  await withConnection(home, { user: "app", password: APP_PASSWORD, database: "shop" }, async (c) => {
    for (const sql of [
      "CREATE TABLE customers (id int PRIMARY KEY AUTO_INCREMENT, name varchar(50) NOT NULL, tenant int)",
      "CREATE TABLE orders (id int PRIMARY KEY AUTO_INCREMENT, customer_id int NOT NULL, total decimal(10,2) NOT NULL, " +
        "doubled decimal(10,2) AS (total * 2) VIRTUAL, FOREIGN KEY (customer_id) REFERENCES customers (id))",
      "CREATE TABLE audit (id int PRIMARY KEY AUTO_INCREMENT, note text, data blob)",
      "CREATE VIEW big_orders AS SELECT id, total FROM orders WHERE total > 20",
      "CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW INSERT INTO audit (note) VALUES (CONCAT('order ', NEW.id))",
      "CREATE PROCEDURE order_count(c int) SELECT COUNT(*) AS n FROM orders WHERE customer_id = c",
      "CREATE EVENT prune ON SCHEDULE EVERY 1 DAY DO DELETE FROM audit WHERE id < 0",
      "INSERT INTO customers (name, tenant) VALUES ('ann', 1), ('bob', 2), ('cy', 1), ('dee', 3), ('ed', 2)",
    ])
      await c.query(sql);
    for (let i = 1; i <= 30; i++)
      await c.query("INSERT INTO orders (customer_id, total) VALUES (?, ?)", [1 + (i % 5), i]);
    await c.query("INSERT INTO audit (note, data) VALUES ('bytes', x'00ff0a0d27225c')");
  });
}

async function withConnection<T>(
  server: MariadbServer,
  as: { user: string; password: string; database?: string } | undefined,
  use: (c: Connection) => Promise<T>,
): Promise<T> {
  const c = await mysql.createConnection({
    host: server.host,
    port: server.port,
    user: as?.user ?? server.adminUser,
    password: as?.password ?? server.adminPassword,
    ...(as?.database ? { database: as.database } : {}),
  });
  try {
    return await use(c);
  } finally {
    await c.end();
  }
}

async function rows(server: MariadbServer, sql: string): Promise<RowDataPacket[]> {
  return withConnection(server, undefined, async (c) => (await c.query<RowDataPacket[]>(sql))[0]);
}

// Not orders: MariaDB 10.11's CHECKSUM TABLE does not read generated columns and sums whatever
// their buffer held (MDEV-22943), so its result changes with the queries run before. The
// ordered contents of every table are compared as well.
const CHECKSUMMED = ["audit", "customers"];

async function checksums(server: MariadbServer, db: string): Promise<string> {
  return JSON.stringify(
    await rows(server, `CHECKSUM TABLE ${CHECKSUMMED.map((t) => `${db}.${t}`).join(", ")}`),
  );
}

async function tables(server: MariadbServer, db: string): Promise<string[]> {
  const r = await rows(
    server,
    `SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${db}'`,
  );
  return r.map((x) => String(x.t)).sort();
}

async function count(server: MariadbServer, db: string, table: string): Promise<number> {
  return Number((await rows(server, `SELECT COUNT(*) AS n FROM ${db}.${table}`))[0]!.n);
}

/** Every table's rows in order, to compare a branch with its source across servers. */
async function contents(server: MariadbServer, db: string, only = TABLES): Promise<string> {
  const out: Record<string, unknown> = {};
  for (const t of only) out[t] = await rows(server, `SELECT * FROM ${db}.${t} ORDER BY id`);
  return JSON.stringify(out);
}

function source(password = APP_PASSWORD, host = "127.0.0.1"): SourceDatabase {
  return { host, port: home.port, database: "shop", user: "app", password, params: {} };
}

function request(copy: BranchCopy, from = source(), crName = "feature-x"): BranchCreateRequest {
  return {
    kind: "MysqlBranchDatabase",
    cr: { namespace: "dev", name: crName },
    copy: { mode: copy.mode ?? "schema", filters: copy.filters ?? [] },
    plan: planCopy(copy),
    source: from,
    identifiers: generateBranchIdentifiers("MysqlBranchDatabase", crName),
  };
}

async function create(
  provisioner: MysqlServerBranches,
  req: BranchCreateRequest,
  signal = new AbortController().signal,
): Promise<ProvisionedBranch> {
  made.push({ provisioner, ref: refOf(req) });
  return provisioner.create(req, signal);
}

function refOf(req: BranchCreateRequest): BranchRef {
  return { kind: req.kind, cr: req.cr, branchName: req.identifiers.database, user: req.identifiers.user };
}

function asBranchUser<T>(server: MariadbServer, b: ProvisionedBranch, use: (c: Connection) => Promise<T>) {
  expect(b.port).toBe(server.port);
  return withConnection(server, { user: b.user, password: b.password, database: b.branchName }, use);
}

/** This test process's children running a MariaDB client tool. */
function clientChildren(): { pid: number; cmdline: string }[] {
  const out: { pid: number; cmdline: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && (comm === "mariadb" || comm === "mariadb-dump"))
        out.push({ pid: Number(entry), cmdline: readFileSync(`/proc/${entry}/cmdline`, "utf8") });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

async function expectSourceUntouched(): Promise<void> {
  expect(await checksums(home, "shop")).toBe(sourceChecksums);
  expect(await contents(home, "shop")).toBe(sourceContents);
  expect(await count(home, "shop", "orders")).toBe(30);
}

function expectNoSecretLogged(...secrets: string[]): void {
  for (const s of [APP_PASSWORD, home.adminPassword, other.adminPassword, ...secrets])
    expect(logLines.join("\n")).not.toContain(s);
}

describe("same server: the server copies itself", () => {
  it("copies everything in mode all; the branch user writes, its trigger fires in the branch, the source is untouched", async () => {
    const req = request({ mode: "all" });
    const b = await create(onHome, req);
    expect(b).toMatchObject({ branchName: req.identifiers.database, method: "template", host: "127.0.0.1" });
    expect(await tables(home, b.branchName)).toEqual(["audit", "big_orders", "customers", "orders"]);
    expect(await contents(home, b.branchName)).toBe(await contents(home, "shop"));
    await asBranchUser(home, b, async (c) => {
      await c.query("INSERT INTO orders (customer_id, total) VALUES (2, 99)");
      // The copied trigger, running as the branch user, wrote to the branch's audit.
      const [audit] = await c.query<RowDataPacket[]>("SELECT note FROM audit ORDER BY id DESC LIMIT 1");
      expect(audit).toEqual([{ note: "order 31" }]);
      const [big] = await c.query<RowDataPacket[]>("SELECT COUNT(*) AS n FROM big_orders");
      expect(Number(big[0]!.n)).toBe(11);
      const [called] = await c.query("CALL order_count(2)");
      expect(Number((called as RowDataPacket[][])[0]![0]!.n)).toBe(7);
      const [dbs] = await c.query<RowDataPacket[]>("SHOW DATABASES");
      expect(dbs.map((d) => d.Database).sort()).toEqual(["information_schema", b.branchName]);
      await expect(c.query("SELECT * FROM shop.orders")).rejects.toThrow(/denied/);
    });
    const definers = await rows(
      home,
      `SELECT DEFINER AS d FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = '${b.branchName}'`,
    );
    expect(definers.map((d) => d.d)).toEqual([`${b.user}@%`]);
    await expectSourceUntouched();
    expectNoSecretLogged(b.password);
  });

  it("copies the schema and the filtered rows in mode schema, and fires no trigger while copying (a source named by an alias)", async () => {
    const b = await create(
      onHome,
      request({ mode: "schema", filters: TENANT_FILTERS }, source(APP_PASSWORD, "localhost")),
    );
    expect(b.method).toBe("template");
    expect(await tables(home, b.branchName)).toEqual(["audit", "big_orders", "customers", "orders"]);
    expect(await count(home, b.branchName, "customers")).toBe(2);
    expect(await count(home, b.branchName, "orders")).toBe(12);
    expect(await count(home, b.branchName, "audit")).toBe(0);
    const doubled = await rows(home, `SELECT SUM(doubled) - 2 * SUM(total) AS d FROM ${b.branchName}.orders`);
    expect(Number(doubled[0]!.d)).toBe(0);
    await expectSourceUntouched();
  });

  it("copies only the filtered tables in mode empty, and nothing without filters", async () => {
    const filtered = await create(
      onHome,
      request({ mode: "empty", filters: [{ table: "customers", where: "tenant = 2" }] }),
    );
    expect(await tables(home, filtered.branchName)).toEqual(["customers"]);
    expect(await count(home, filtered.branchName, "customers")).toBe(2);
    const empty = await create(onHome, request({ mode: "empty" }, source(), "empty-one"));
    expect(await tables(home, empty.branchName)).toEqual([]);
    await asBranchUser(home, empty, (c) => c.query("CREATE TABLE scratch (id int)"));
  });

  it("returns a complete branch as it is when asked again", async () => {
    const req = request({ mode: "schema" });
    const first = await create(onHome, req);
    await asBranchUser(home, first, (c) => c.query("INSERT INTO customers (name) VALUES ('kept')"));
    const again = await onHome.create(req, new AbortController().signal);
    expect(again).toEqual(first);
    expect(await count(home, first.branchName, "customers")).toBe(1);
  });

  it("drops a half-made branch and makes it again", async () => {
    const req = request({ mode: "schema", filters: TENANT_FILTERS });
    const { database, user } = req.identifiers;
    await rows(home, `CREATE DATABASE ${database} COMMENT 'switchyard branch of dev/feature-x: copying'`);
    await rows(home, `CREATE TABLE ${database}.junk (id int)`);
    await rows(home, `CREATE USER '${user}'@'%' IDENTIFIED BY 'old-password'`);
    const b = await create(onHome, req);
    expect(await tables(home, database)).toEqual(["audit", "big_orders", "customers", "orders"]);
    expect(await count(home, database, "customers")).toBe(2);
    await asBranchUser(home, b, async (c) =>
      expect((await c.query("SELECT 1 AS one"))[0]).toEqual([{ one: 1 }]),
    );
  });

  it("drops the database, the user and its sessions; a second drop succeeds; other names are refused", async () => {
    const req = request({ mode: "schema" });
    const b = await onHome.create(req, new AbortController().signal);
    const session = await mysql.createConnection({
      host: home.host,
      port: home.port,
      user: b.user,
      password: b.password,
      database: b.branchName,
    });
    try {
      await onHome.drop(refOf(req), new AbortController().signal);
      await expect(session.query("SELECT 1")).rejects.toThrow();
    } finally {
      session.destroy();
    }
    await onHome.drop(refOf(req), new AbortController().signal);
    expect(await rows(home, `SHOW DATABASES LIKE '${b.branchName}'`)).toEqual([]);
    expect(await rows(home, `SELECT User FROM mysql.user WHERE User = '${b.user}'`)).toEqual([]);
    const foreign = onHome.drop({ ...refOf(req), branchName: "shop" }, new AbortController().signal);
    await expect(foreign).rejects.toMatchObject({ terminal: true, reason: "NameNotGenerated" });
    expect(await count(home, "shop", "orders")).toBe(30);
  });

  it("stops the statement on the server when aborted mid-copy", async () => {
    const abort = new AbortController();
    const req = request({ mode: "schema", filters: [{ table: "orders", where: "SLEEP(0.2) = 0" }] });
    const creating = create(onHome, req, abort.signal);
    await eventually(
      "the row copy running on the server",
      async () =>
        (
          await rows(
            home,
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO%SLEEP%'",
          )
        ).length > 0,
    );
    abort.abort();
    await expect(creating).rejects.toMatchObject({ name: "AbortError" });
    await eventually(
      "no row copy left on the server",
      async () =>
        (
          await rows(
            home,
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO%SLEEP%'",
          )
        ).length === 0,
    );
    const state = await rows(
      home,
      `SELECT SCHEMA_COMMENT AS c FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '${req.identifiers.database}'`,
    );
    expect(String(state[0]?.c)).not.toMatch(/complete/);
  });
});

describe("another server: the source streamed with mariadb-dump | mariadb", () => {
  it("copies everything in mode all, and the branch user writes to it", async () => {
    const b = await create(onOther, request({ mode: "all" }));
    expect(b).toMatchObject({ method: "stream", port: other.port });
    expect(await tables(other, b.branchName)).toEqual(["audit", "big_orders", "customers", "orders"]);
    expect(await contents(other, b.branchName)).toBe(await contents(home, "shop"));
    await asBranchUser(other, b, async (c) => {
      await c.query("INSERT INTO orders (customer_id, total) VALUES (1, 5)");
      const [audit] = await c.query<RowDataPacket[]>("SELECT COUNT(*) AS n FROM audit");
      expect(Number(audit[0]!.n)).toBe(32);
    });
    const events = await rows(
      other,
      `SELECT EVENT_NAME AS e FROM information_schema.EVENTS WHERE EVENT_SCHEMA = '${b.branchName}'`,
    );
    expect(events.map((e) => e.e)).toEqual(["prune"]);
    await expectSourceUntouched();
    expectNoSecretLogged(b.password);
  });

  it("copies the schema and the filtered rows in mode schema", async () => {
    const b = await create(onOther, request({ mode: "schema", filters: TENANT_FILTERS }));
    expect(await tables(other, b.branchName)).toEqual(["audit", "big_orders", "customers", "orders"]);
    expect(await count(other, b.branchName, "customers")).toBe(2);
    expect(await count(other, b.branchName, "orders")).toBe(12);
    expect(await count(other, b.branchName, "audit")).toBe(0);
    const routines = await rows(
      other,
      `SELECT ROUTINE_NAME AS r FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = '${b.branchName}'`,
    );
    expect(routines.map((r) => r.r)).toEqual(["order_count"]);
  });

  it("copies only the filtered tables in mode empty", async () => {
    const b = await create(
      onOther,
      request({ mode: "empty", filters: [{ table: "shop.customers", where: "tenant = 1" }] }),
    );
    expect(await tables(other, b.branchName)).toEqual(["customers"]);
    expect(await contents(other, b.branchName, ["customers"])).toBe(
      JSON.stringify({
        customers: await rows(home, "SELECT * FROM shop.customers WHERE tenant = 1 ORDER BY id"),
      }),
    );
  });

  it("fails terminally on a wrong source password, a missing table or a rejected filter, without the password", async () => {
    const wrong = "Wrong-Password-42";
    const bad = request({ mode: "schema" }, source(wrong));
    const error = await onOther.create(bad, new AbortController().signal).catch((e: unknown) => e);
    expect(error).toMatchObject({ terminal: true, reason: "SourceAccessDenied" });
    expect((error as Error).message).toMatch(/Access denied for user 'app'/);
    expect(JSON.stringify(error) + String((error as Error).stack)).not.toContain(wrong);
    expect(await rows(other, `SHOW DATABASES LIKE '${bad.identifiers.database}'`)).toEqual([]);
    const missing = request({ mode: "empty", filters: [{ table: "nope", where: "id = 1" }] });
    await expect(onOther.create(missing, new AbortController().signal)).rejects.toMatchObject({
      terminal: true,
      reason: "TableMissing",
    });
    const rejected = request({ mode: "schema", filters: [{ table: "orders", where: "no_such_column = 1" }] });
    const refused = await onOther.create(rejected, new AbortController().signal).catch((e: unknown) => e);
    expect(refused).toMatchObject({ terminal: true, reason: "FilterInvalid" });
    expect((refused as Error).message).toMatch(/^spec\.copy\.filters\[0\]/);
    expectNoSecretLogged(wrong);
  });

  it("kills mariadb-dump and mariadb when aborted mid-copy, with no password on their command lines; the next create makes the branch", async () => {
    const abort = new AbortController();
    // 30 rows at 50 ms each: the rows step runs long enough to be aborted.
    const req = request({ mode: "schema", filters: [{ table: "orders", where: "SLEEP(0.05) = 0" }] });
    const creating = create(onOther, req, abort.signal);
    const children = await eventually("the filtered rows' mariadb-dump and its mariadb running", () => {
      const c = clientChildren();
      return c.length === 2 && c.some((x) => x.cmdline.includes("--where=")) ? c : undefined;
    });
    for (const c of children)
      for (const secret of [APP_PASSWORD, other.adminPassword, req.identifiers.password])
        expect(c.cmdline).not.toContain(secret);
    abort.abort();
    await expect(creating).rejects.toMatchObject({ name: "AbortError" });
    expect(clientChildren()).toEqual([]);
    const b = await onOther.create(req, new AbortController().signal);
    expect(await count(other, b.branchName, "orders")).toBe(30);
  });
});
