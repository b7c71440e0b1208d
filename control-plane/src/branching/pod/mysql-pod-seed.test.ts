import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { testScratchDir } from "../../../../test/support/scratch-dir.js";
import type { BranchCreateRequest } from "../branch-provisioner.js";
import { planCopy } from "../copy-plan.js";
import { MysqlBranchError } from "../mysql/mysql-branch-error.js";
import { rewriteDefinerLine } from "../mysql/mysql-definer-rewrite.js";
import { branchDefiner, definerSedProgram, mysqlSeedScript } from "./mysql-pod-seed.js";

const SOURCE_PASSWORD = "S0urce-Pa55word";
const BRANCH_PASSWORD = "BranchPa55wordBranchPa55wordBranchPa55wo";
const USER = "sy_feature_abcdefghijkl";

function request(
  copy: BranchCreateRequest["copy"],
  params: Record<string, string> = {},
): BranchCreateRequest {
  return {
    kind: "MysqlBranchDatabase",
    cr: { namespace: "shop", name: "feature", uid: "u-1" },
    copy,
    plan: planCopy({ mode: copy.mode, filters: [...copy.filters] }),
    source: {
      host: "db.shop.svc",
      port: 3306,
      database: "shop",
      user: "app",
      password: SOURCE_PASSWORD,
      params,
    },
    identifiers: { database: USER, user: USER, password: BRANCH_PASSWORD },
  };
}

const bashParses = (script: string) => execFileSync("bash", ["-n"], { input: script, encoding: "utf8" });

/** `input` through the seed script's sed program, as the pod runs it. */
function sed(program: string, input: Buffer): Buffer {
  return execFileSync("sed", ["-E", "-e", program], { input, env: { ...process.env, LC_ALL: "C" } });
}

// The cases of mysql-definer-rewrite.test.ts: every definer form a dump writes, and a row line
// holding the text, which stays.
const DUMP_LINES = [
  "/*!40101 SET NAMES utf8mb4 */;",
  "CREATE DEFINER=`app`@`%` PROCEDURE `p`()",
  "/*!50013 DEFINER=`app`@`10.0.%` SQL SECURITY DEFINER */",
  "/*!50003 CREATE*/ /*!50017 DEFINER=`we``ird`@`localhost`*/ /*!50003 trigger t after insert on o for each row set @x = 1 */;;",
  "/*!50106 CREATE*/ /*!50117 DEFINER=`a_role`*/ /*!50106 EVENT `e` ON SCHEDULE EVERY 1 DAY DO delete from audit */ ;;",
  "INSERT INTO `notes` VALUES (1,'DEFINER=`app`@`%` stays as written'),(2,'ü');",
];

describe("definerSedProgram", () => {
  const current = definerSedProgram("DEFINER=CURRENT_USER");

  it("rewrites a dump exactly as DefinerRewrite does, row lines untouched", () => {
    const dump = Buffer.from(`${DUMP_LINES.join("\n")}\n`);
    const expected = Buffer.concat(DUMP_LINES.map((l) => rewriteDefinerLine(Buffer.from(`${l}\n`))));
    const out = sed(current, dump);
    expect(out.toString()).toBe(expected.toString());
    expect(out.toString()).toContain("CREATE DEFINER=CURRENT_USER PROCEDURE `p`()");
    expect(out.toString()).toContain("/*!50117 DEFINER=CURRENT_USER*/");
    expect(out.toString()).toContain("VALUES (1,'DEFINER=`app`@`%` stays as written')");
  });

  it("keeps bytes that are not valid UTF-8, and a last line without a newline", () => {
    const line = Buffer.concat([
      Buffer.from("CREATE DEFINER=`app`@`%` VIEW v AS SELECT '"),
      Buffer.from([0xff, 0xfe]),
      Buffer.from("'\nCREATE DEFINER=`app`@`%` FUNCTION f()"),
    ]);
    const out = sed(current, line);
    expect(out).toEqual(
      Buffer.concat([
        Buffer.from("CREATE DEFINER=CURRENT_USER VIEW v AS SELECT '"),
        Buffer.from([0xff, 0xfe]),
        Buffer.from("'\nCREATE DEFINER=CURRENT_USER FUNCTION f()"),
      ]),
    );
  });

  it("agrees with rewriteDefinerLine on lines built from a dump's awkward pieces", () => {
    const pieces = [
      "DEFINER=",
      "`",
      "``",
      "@",
      "a",
      " ",
      "`x`",
      "%",
      "INSERT INTO ",
      "*/",
      "DEFINER=`u`@`h`",
    ];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const lines: string[] = [];
    for (let i = 0; i < 400; i++) {
      let line = "";
      for (let n = 1 + (next() % 8); n > 0; n--) line += pieces[next() % pieces.length];
      lines.push(line);
    }
    const input = Buffer.from(`${lines.join("\n")}\n`);
    const expected = lines.map((l) => rewriteDefinerLine(Buffer.from(l)).toString());
    expect(sed(current, input).toString().split("\n").slice(0, -1)).toEqual(expected);
  });

  it("writes the branch's own account as the definer, whatever the replacement holds", () => {
    const out = sed(definerSedProgram(branchDefiner(USER)), Buffer.from(`${DUMP_LINES[1]}\n`));
    expect(out.toString()).toBe(`CREATE DEFINER=\`${USER}\`@\`%\` PROCEDURE \`p\`()\n`);
    const odd = sed(definerSedProgram("DEFINER=`a&b#c\\d`"), Buffer.from("DEFINER=`x`\n"));
    expect(odd.toString()).toBe("DEFINER=`a&b#c\\d`\n");
  });
});

describe("mysqlSeedScript", () => {
  it("schema with a filter: the source's character set, the schema, the filtered rows, then the triggers; no password", () => {
    const script = mysqlSeedScript(
      request({ mode: "schema", filters: [{ table: "shop.orders", where: "note = 'it''s' OR id < 3" }] }),
    );
    bashParses(script);
    expect(script).toMatch(/^#!\/bin\/bash\n/);
    expect(script).toContain("set -Eeuo pipefail");
    expect(script).toContain(
      "source_connection=('--host=db.shop.svc' '--port=3306' '--user=app' '--protocol=tcp')",
    );
    const order = [
      "ALTER DATABASE",
      "source_dump '--no-data' '--skip-triggers' '--routines' '--events' 'shop' | rewrite_definers | branch_sql",
      `source_dump '--no-create-info' '--skip-triggers' '--where=(note = '\\''it'\\'''\\''s'\\'' OR id < 3)' 'shop' 'orders' | rewrite_definers`,
      "source_dump '--no-data' '--no-create-info' '--triggers' 'shop' | rewrite_definers",
      "switchyard: seeded",
    ].map((s) => script.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(script).toContain(`definer_program='/^INSERT INTO /!s#DEFINER=`);
    expect(script).toContain('MYSQL_PWD="$SWITCHYARD_SOURCE_PASSWORD" mariadb-dump --no-defaults');
    expect(script).toContain("--single-transaction --no-tablespaces --hex-blob --skip-comments");
    expect(script).not.toContain(SOURCE_PASSWORD);
    expect(script).not.toContain(BRANCH_PASSWORD);
    expect(script).toContain("mysql://app:***@db.shop.svc:3306/shop");
  });

  it("all: one dump of everything; empty without filters: no dump, the source still checked", () => {
    const all = mysqlSeedScript(request({ mode: "all", filters: [] }));
    bashParses(all);
    expect(all.match(/^source_dump /gm)).toEqual(["source_dump "]);
    expect(all).toContain("source_dump '--routines' '--events' '--triggers' 'shop' | rewrite_definers");
    const empty = mysqlSeedScript(request({ mode: "empty", filters: [] }));
    bashParses(empty);
    expect(empty).not.toMatch(/^source_dump /m);
    expect(empty).toContain("facts=$(source_sql -e");
  });

  it("takes TLS from the source URL's parameters and refuses one it does not know, naming it", () => {
    expect(mysqlSeedScript(request({ mode: "all", filters: [] }, { sslMode: "REQUIRED" }))).toContain(
      "'--ssl' '--skip-ssl-verify-server-cert')",
    );
    expect(mysqlSeedScript(request({ mode: "all", filters: [] }, { ssl: "false" }))).toContain(
      "'--skip-ssl')",
    );
    let error: unknown;
    try {
      mysqlSeedScript(request({ mode: "all", filters: [] }, { "ssl-mode": "sometimes" }));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(MysqlBranchError);
    expect(error).toMatchObject({ reason: "SourceInvalid", terminal: true });
    expect((error as Error).message).toMatch(/parameter ssl-mode: must be disabled/);
  });

  it("refuses a filter on another database, naming the filter", () => {
    expect(() =>
      mysqlSeedScript(request({ mode: "schema", filters: [{ table: "billing.invoices", where: "id = 1" }] })),
    ).toThrow(/^spec\.copy\.filters\[0\]\.table: billing\.invoices names database billing/);
  });

  // The script's own shell logic, with stand-ins for the MariaDB tools on PATH (the pod's real
  // tools and server: test/integration/branching/mysql-pod-branches.test.ts).
  function runWithTools(script: string, dumpExit: number) {
    const dir = testScratchDir("mysql-pod-seed-");
    const bin = join(dir, "bin");
    const data = join(dir, "data");
    mkdirSync(bin);
    mkdirSync(join(data, "mysql"), { recursive: true });
    writeFileSync(join(data, ".hidden"), "x");
    writeFileSync(join(data, "server.pid"), "999999999");
    writeFileSync(
      join(bin, "mariadb"),
      `#!/bin/bash
echo "mariadb $* pwd=$MYSQL_PWD" >>${dir}/calls
case "$*" in
  *@@datadir*) printf '%s/\\tserver.pid\\n' ${data} ;;
  *SCHEMATA*) printf 'utf8mb4\\tutf8mb4_unicode_ci\\n' ;;
  *) cat >>${dir}/loaded ;;
esac
`,
      { mode: 0o755 },
    );
    writeFileSync(
      join(bin, "mariadb-dump"),
      `#!/bin/bash
echo "mariadb-dump $* pwd=$MYSQL_PWD" >>${dir}/calls
printf 'CREATE DEFINER=\`app\`@\`%%\` VIEW v AS SELECT 1;\\nINSERT INTO t VALUES (1,'"'"'DEFINER=\`app\`@\`%%\`'"'"');\\n'
[ ${dumpExit} -eq 0 ] || { echo "mariadb-dump: Got error: 1045: Access denied for user 'app'" >&2; exit ${dumpExit}; }
`,
      { mode: 0o755 },
    );
    writeFileSync(
      join(bin, "mariadbd"),
      `#!/bin/bash
printf 'datadir    /elsewhere/\\nsocket     ${dir}/mysqld.sock\\nsocket-x   no\\n'
`,
      { mode: 0o755 },
    );
    const result = spawnSync("bash", ["-c", script], {
      encoding: "utf8",
      env: {
        PATH: `${bin}:/usr/bin:/bin`,
        HOME: dir,
        MARIADB_DATABASE: USER,
        MARIADB_ROOT_PASSWORD: "root-pw",
        SWITCHYARD_SOURCE_PASSWORD: SOURCE_PASSWORD,
      },
    });
    const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), "utf8") : "");
    return { result, calls: read("calls"), loaded: read("loaded"), data };
  }

  it("loads each dump as root with the definers rewritten, the source password in the source's tools only", () => {
    const script = mysqlSeedScript(request({ mode: "all", filters: [] }), "/nonexistent");
    const { result, calls, loaded, data } = runWithTools(script, 0);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/switchyard: seeded sy_feature_abcdefghijkl in \d+ s/);
    expect(loaded).toContain(`CREATE DEFINER=\`${USER}\`@\`%\` VIEW v AS SELECT 1;`);
    expect(loaded).toContain("INSERT INTO t VALUES (1,'DEFINER=`app`@`%`');");
    expect(calls).toContain(`ALTER DATABASE \`${USER}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
    for (const line of calls.split("\n").filter(Boolean)) {
      if (line.includes("--protocol=tcp")) expect(line).toMatch(new RegExp(`pwd=${SOURCE_PASSWORD}$`));
      else expect(line).toMatch(/--protocol=socket --socket=\S+\/mysqld\.sock --user=root .*pwd=root-pw$/);
    }
    expect(readdirSync(data).sort()).toEqual([".hidden", "mysql", "server.pid"]);
  });

  it("a failing step ends the script naming the step, after the data directory is emptied", () => {
    const script = mysqlSeedScript(
      request({ mode: "schema", filters: [{ table: "orders", where: "id < 3" }] }),
    );
    const { result, data } = runWithTools(script, 2);
    expect(result.status).not.toBe(0);
    const lines = result.stderr.trim().split("\n");
    expect(lines.at(-2)).toMatch(/Access denied for user 'app'/);
    expect(lines.at(-1)).toBe(
      `switchyard: seeding ${USER} failed while copying the schema (exit ${result.status})`,
    );
    expect(readdirSync(data)).toEqual([]);
    expect(result.stderr + result.stdout).not.toContain(SOURCE_PASSWORD);
  });
});
