// Database branches end to end, as a developer uses them: the embedded stack (a management-
// only Primary, east as the Default cluster, west; the real chart and its identities) with a
// real PostgreSQL 18 server holding the demo workload's database and the branches. The CLI
// creates the branch on the Primary, the sync controller copies it to east, east's branching
// controller makes it, and `switchyard exec` runs a local program with a stock driver (`pg`)
// against the rewritten DATABASE_URL, through the CLI's local forward and east's agent. A
// MariaDB server holds a second database the workload uses (SHOP_MYSQL_URL): one session can
// take branches of both, each through its own forward, with a stock driver each (`mysql2`).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mysqlBranchDatabaseClient, pgBranchDatabaseClient } from "../../proto/api/v1alpha1/index.js";
import { startMariadb, type MariadbServer } from "../env/databases/mariadb-server.js";
import { startPostgres, type PostgresServer } from "../env/databases/postgres-server.js";
import { startEmbeddedStack, type EmbeddedStack } from "../env/stack/embedded-stack.js";
import { launch, tsx } from "../support/launch.js";
import { eventually } from "../support/poll.js";

const PASSWORD = "source-app-password";
let pg18: PostgresServer;
let maria: MariadbServer;
let stack: EmbeddedStack;
let dir: string;

const sourceUrl = () => `postgres://app:${PASSWORD}@127.0.0.1:${pg18.port}/shop`;
const mysqlSourceUrl = () => `mysql://app:${PASSWORD}@127.0.0.1:${maria.port}/orders`;

async function mysqlQuery<T>(url: string, text: string): Promise<T[]> {
  const c = await mysql.createConnection({ uri: url, multipleStatements: true });
  try {
    return (await c.query(text))[0] as T[];
  } finally {
    await c.end();
  }
}

async function query<T>(url: string, text: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows as T[];
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-branching-e2e-"));
  [pg18, maria] = await Promise.all([startPostgres({ version: 18 }), startMariadb({ name: "mariadb-e2e" })]);
  await mysqlQuery(
    maria.adminUrl,
    `CREATE DATABASE orders; CREATE USER 'app'@'%' IDENTIFIED BY '${PASSWORD}';
     GRANT ALL ON orders.* TO 'app'@'%';`,
  );
  await mysqlQuery(
    mysqlSourceUrl(),
    `CREATE TABLE order_lines (id int AUTO_INCREMENT PRIMARY KEY, sku varchar(20) NOT NULL);
     INSERT INTO order_lines (sku) VALUES ('a'), ('b'), ('c');`,
  );
  await query(pg18.adminUrl, `CREATE ROLE app LOGIN PASSWORD '${PASSWORD}'`);
  await query(pg18.adminUrl, "CREATE DATABASE shop OWNER app");
  await query(
    sourceUrl(),
    `CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);
     INSERT INTO items (name) SELECT 'item ' || g FROM generate_series(1, 50) g;`,
  );
  stack = await startEmbeddedStack({
    branchServers: { postgres: pg18.adminUrl, mysql: maria.adminUrl },
    demoEnv: { DATABASE_URL: sourceUrl(), SHOP_MYSQL_URL: mysqlSourceUrl() },
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all([pg18?.stop(), maria?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** `switchyard exec` with `config`, running `script` (an ES module using `pg`); resolves with its output and status. */
async function execWithBranch(
  config: object,
  script: string,
): Promise<{ output: string; status: number | string }> {
  const configFile = join(dir, `switchyard-${Date.now()}.json`);
  writeFileSync(configFile, JSON.stringify(config));
  const scriptFile = join(process.cwd(), `test/e2e/fixtures/.branch-app-${process.pid}.mjs`);
  writeFileSync(scriptFile, script);
  try {
    const proc = await launch({
      name: "switchyard-exec-branch",
      ...tsx("cli/src/main.ts", [
        "exec",
        ...stack.developerCliArgs,
        "--config",
        configFile,
        // The loopback forward through east's agent (the transparent network's direct dial of
        // the branch's own host is proven on real pods, test/pods/sessions.test.ts).
        "--network=proxy",
        "--",
        process.execPath,
        scriptFile,
      ]),
    });
    const status = await proc.exited;
    return { output: proc.output(), status };
  } finally {
    rmSync(scriptFile, { force: true });
  }
}

const APP = `
import mysql from "mysql2/promise";
import pg from "pg";
const url = new URL(process.env.DATABASE_URL);
console.log("branch-url host=" + url.hostname + " db=" + url.pathname.slice(1) + " user=" + url.username);
const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
await c.connect();
await c.query("INSERT INTO items (name) VALUES ('from the laptop')");
const { rows } = await c.query("SELECT count(*)::int AS n FROM items");
console.log("branch-rows " + rows[0].n);
await c.end();
`;

describe("database branches end to end", () => {
  it("gives the local program a branch of east's database through its DATABASE_URL; the source is untouched", async () => {
    const { output, status } = await execWithBranch(
      { branches: [{ envVar: "DATABASE_URL", engine: "postgres", id: "shop-e2e", copy: { mode: "all" } }] },
      APP,
    );
    expect(status, output).toBe(0);
    expect(output).toMatch(
      /branch-url host=127\.0\.0\.1 db=sy_branch_shop_e2e_\w+ user=sy_branch_shop_e2e_\w+/,
    );
    expect(output).toMatch(/branch-rows 51/);
    expect(output).not.toContain(PASSWORD);
    expect((await query<{ n: number }>(sourceUrl(), "SELECT count(*)::int AS n FROM items"))[0]!.n).toBe(50);

    // Shared by id: a second session gets the same branch, with the first one's row.
    const again = await execWithBranch(
      { branches: [{ envVar: "DATABASE_URL", engine: "postgres", id: "shop-e2e", copy: { mode: "all" } }] },
      APP,
    );
    expect(again.status, again.output).toBe(0);
    expect(again.output).toMatch(/branch-rows 52/);

    // The branch lives on both clusters until deleted on the Primary; then the copy and the database go.
    const primary = pgBranchDatabaseClient(stack.primary.kubeConfig());
    const east = pgBranchDatabaseClient(stack.workloads.east!.cluster.kubeConfig());
    const copy = await east.get({ namespace: "default", name: "branch-shop-e2e" });
    expect(copy?.status?.phase).toBe("Ready");
    await primary.delete({ namespace: "default", name: "branch-shop-e2e" });
    await eventually(
      "the branch gone on both clusters",
      async () =>
        (await primary.get({ namespace: "default", name: "branch-shop-e2e" })) === undefined &&
        (await east.get({ namespace: "default", name: "branch-shop-e2e" })) === undefined,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const left = await query<{ datname: string }>(
      pg18.adminUrl,
      "SELECT datname FROM pg_database WHERE datname LIKE 'sy\\_%'",
    );
    expect(left).toEqual([]);
  }, 240_000);

  it("gives one session a filtered PostgreSQL branch and a MariaDB branch, each through its own forward", async () => {
    const { output, status } = await execWithBranch(
      {
        branches: [
          {
            envVar: "DATABASE_URL",
            engine: "postgres",
            copy: { mode: "schema", filters: [{ table: "items", where: "id <= 5" }] },
          },
          { envVar: "SHOP_MYSQL_URL", engine: "mysql", copy: { mode: "all" } },
        ],
      },
      `
import mysql from "mysql2/promise";
import pg from "pg";
const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
await c.connect();
const { rows } = await c.query("SELECT count(*)::int AS n, max(id) AS top FROM items");
console.log("pg-rows " + rows[0].n + " top " + rows[0].top);
await c.query("INSERT INTO items (name) VALUES ('next')");
const next = await c.query("SELECT max(id) AS id FROM items");
console.log("pg-next-id " + next.rows[0].id);
await c.end();
const m = await mysql.createConnection(process.env.SHOP_MYSQL_URL);
await m.query("INSERT INTO order_lines (sku) VALUES ('from-laptop')");
const [lines] = await m.query("SELECT count(*) AS n FROM order_lines");
console.log("mysql-url " + new URL(process.env.SHOP_MYSQL_URL).host + " rows " + lines[0].n);
await m.end();
`,
    );
    expect(status, output).toBe(0);
    // Only the filtered rows, and the next id past them (a same-server copy keeps the source's
    // sequence position, a stream moves it just past the copied rows).
    expect(output).toMatch(/pg-rows 5 top 5/);
    expect(Number(/pg-next-id (\d+)/.exec(output)?.[1])).toBeGreaterThan(5);
    expect(output).toMatch(/mysql-url 127\.0\.0\.1:\d+ rows 4/);
    expect(output).not.toContain(PASSWORD);
    // The session's own branches (no id) go with it: the databases, then the CRs on the
    // Primary (whose finalizer waits for the copies on east to be gone).
    const onPrimary = () =>
      Promise.all([
        pgBranchDatabaseClient(stack.primary.kubeConfig()).list({ namespace: "default" }),
        mysqlBranchDatabaseClient(stack.primary.kubeConfig()).list({ namespace: "default" }),
      ]);
    await eventually(
      "the session's branches gone: databases and CRs",
      async () =>
        (await query(pg18.adminUrl, "SELECT 1 FROM pg_database WHERE datname LIKE 'sy\\_%'")).length === 0 &&
        (await mysqlQuery(maria.adminUrl, "SHOW DATABASES LIKE 'sy\\_%'")).length === 0 &&
        (await onPrimary()).every((l) => l.items.length === 0),
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // The sources are untouched.
    expect((await query<{ n: number }>(sourceUrl(), "SELECT count(*)::int AS n FROM items"))[0]!.n).toBe(50);
    expect(
      (await mysqlQuery<{ n: number }>(mysqlSourceUrl(), "SELECT count(*) AS n FROM order_lines"))[0]!.n,
    ).toBe(3);
  }, 240_000);
});
