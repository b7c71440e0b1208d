// The CLI's side of database branches against a real API server (test/env) with the
// Switchyard CRDs, as a client-certificate user under RBAC: `exec` with `branches` in
// switchyard.json creates a branch CR per entry on the Primary before the session, shows
// its progress, names it in the session's connectParams, forwards a local port through the
// session to the branch Secret's host:port and asks the Default agent for the rewrite with
// that port; a shared branch (id) is reused when its spec matches and refused naming the
// field when it does not; Failed and the timeout end the start with the branch's reason or
// naming branchTimeoutSeconds, leaving nothing behind; `branches list|status|destroy`.
//
// The test itself plays the branching controller (writing the CR's status and its Secret)
// and the Primary's session control plane (marking sessions Ready and routing them through
// a real router process to scripted agents east, the Default, and west). The real branching
// and sync controllers are tested with their own suites; the end-to-end path — a real
// controller, the real agent rewriting DATABASE_URL, a local app writing to a real branch
// through the forward — is the `it.todo` at the end: the CLI's seam for it is
// `openSession({ branches })` → `Session.branches` → `BranchForwards` → `client.env({ branches })`.
import { writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import {
  OPERATOR_OBJECT_NAME,
  branchSecretData,
  multiClusterSessionClient,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  switchyardOperatorClient,
  type BranchDatabaseSpec,
  type BranchDatabaseStatus,
  type BranchKind,
} from "../../../proto/api/v1alpha1/index.js";
import type { ScriptedAgent } from "../../peers/scripted-agent.js";
import { eventually } from "../../support/poll.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import type { RouterProcess } from "../router/router-process.js";
import {
  condition,
  configFile as scratchConfigFile,
  runCli,
  startDeveloperCluster,
  switchyardRule,
  waitForFile,
  type DeveloperCluster,
} from "./developer-cluster.js";
import { simulatePrimary } from "./simulated-primary.js";

const NS = "shop";
const TARGET = "deployment/shop";
const F = pb.FrameFamily;
const PASSWORD = "Br4nchPassw0rdXYZ0123456789abcdefghijkl";

let env: DeveloperCluster;
let admin: KubeConfig;
let alice: string;
let router: RouterProcess;
let east: ScriptedAgent;
let west: ScriptedAgent;

const branchClient = (kind: BranchKind) =>
  kind === "PgBranchDatabase" ? pgBranchDatabaseClient(admin) : mysqlBranchDatabaseClient(admin);

const cli = (...args: string[]) => runCli(["--kubeconfig", alice, "-n", NS, ...args]);

/** A switchyard.json in a scratch directory (removed with the test). */
const configFile = (cfg: Record<string, unknown>) => scratchConfigFile("switchyard-branches-", TARGET, cfg);

beforeAll(async () => {
  env = await startDeveloperCluster({
    namespace: NS,
    rules: [
      switchyardRule(["multiclustersessions", "pgbranchdatabases", "mysqlbranchdatabases"]),
      { apiGroups: [""], resources: ["secrets"], verbs: ["get"] },
    ],
    eastEnv: { DATABASE_URL: "postgres://app:source-pw@db.shop.svc:5432/shop?sslmode=disable" },
  });
  ({ admin, alice, router, east, west } = env);
  await switchyardOperatorClient(admin).patchStatus(
    { name: OPERATOR_OBJECT_NAME },
    {
      supportedFeatures: ["MultiClusterPrimary", "DbBranching"],
      defaultNamespace: NS,
      routerEndpoint: `ws://127.0.0.1:${router.port}`,
    },
  );
}, 240_000);

afterAll(() => env?.stop());

// ---- the test's stand-in for the branching controller ----

/** The branch CR of `kind` named `name`, once the CLI has created it. */
const created = (kind: BranchKind, name: (n: string) => boolean) =>
  eventually(`a ${kind} from the CLI`, async () =>
    (await branchClient(kind).list({ namespace: NS })).items.find((b) => name(b.metadata.name!)),
  );

async function setStatus(kind: BranchKind, name: string, status: BranchDatabaseStatus) {
  await branchClient(kind).patchStatus({ name, namespace: NS }, status);
}

/** Pending with a progress message, then the Secret and Ready — what the controller reports. */
async function provision(kind: BranchKind, name: string, port = "5432"): Promise<string> {
  await setStatus(kind, name, {
    phase: "Pending",
    conditions: [condition("Ready", "False", "Copying", "copying schema from the source")],
  });
  const secretName = `${name}-branch`;
  await admin.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: NS,
    body: {
      metadata: { name: secretName },
      data: branchSecretData({
        host: "pg-branches.db.svc",
        port,
        database: "sy_shop_abc",
        user: "sy_shop_abc",
        password: PASSWORD,
        url: `postgres://sy_shop_abc:${PASSWORD}@pg-branches.db.svc:${port}/sy_shop_abc`,
      }),
    },
  });
  await setStatus(kind, name, {
    phase: "Ready",
    branchName: "sy_shop_abc",
    secretName,
    expiresAt: new Date(Date.now() + 300_000).toISOString(),
    sessions: [],
    conditions: [condition("Ready", "True", "Provisioned", "branch sy_shop_abc is ready")],
  });
  return secretName;
}

/** The test's stand-in for the Primary's session control plane (simulated-primary.ts). */
const simulateSessions = () => simulatePrimary({ admin, namespace: NS, router, east, west });

const sessionsLeft = async () => (await multiClusterSessionClient(admin).list({ namespace: NS })).items;

describe("exec with a database branch", () => {
  it("creates the branch first, shows its progress, forwards a local port to it and asks for the rewrite", async () => {
    const sessions = simulateSessions();
    const done = join(testScratchDir("switchyard-branch-cmd-"), "done");
    try {
      const cfg = configFile({ branches: [{ envVar: "DATABASE_URL", engine: "postgres" }] });
      // The proxy network: the loopback forward (on the transparent network the command dials
      // the branch's own host itself; test/pods/sessions.test.ts proves that).
      const exited = cli("exec", "-f", cfg, "--network=proxy", "--", ...waitForFile(done));
      const cr = await created("PgBranchDatabase", (n) => n.endsWith("-database-url"));
      const name = cr.metadata.name!;
      expect(name).toMatch(/^mc-[0-9a-f]{16}-database-url$/);
      expect(cr.spec).toMatchObject({ target: TARGET, source: { fromEnv: { name: "DATABASE_URL" } } });
      // The session waits for the branch: none exists before it is Ready.
      expect(await sessionsLeft()).toHaveLength(0);
      await provision("PgBranchDatabase", name);

      const get = await east.inbox.waitFor(
        (f) => f.family === F.ENV && f.kind === pb.EnvKind.GET && f.as(pb.EnvGetSchema).branches.length > 0,
        60_000,
        "the EnvGet asking for the branch rewrite",
      );
      const [rewrite] = get.as(pb.EnvGetSchema).branches;
      expect(rewrite).toMatchObject({
        variable: "DATABASE_URL",
        database: "sy_shop_abc",
        user: "sy_shop_abc",
        password: PASSWORD,
        host: "127.0.0.1",
      });
      const session = sessions.seen.at(-1)!;
      expect(name.startsWith(session.metadata.name!)).toBe(true);
      expect(session.spec.connectParams?.databaseBranches).toEqual([
        { envVar: "DATABASE_URL", kind: "PgBranchDatabase", name },
      ]);

      // A driver connecting to the local port reaches the Secret's host:port from east.
      const echoed = await new Promise<string>((resolve, reject) => {
        const s = connect(rewrite!.port, "127.0.0.1", () => s.write("SELECT 1"));
        s.once("data", (d) => (resolve(d.toString()), s.destroy()));
        s.once("error", reject);
      });
      expect(echoed).toBe("SELECT 1");
      const dial = east.inbox.all.findLast(
        (f) => f.family === F.OUTGOING_TCP && f.kind === pb.OutgoingKind.CONNECT,
      )!;
      expect(dial.as(pb.TcpConnectSchema)).toMatchObject({ host: "pg-branches.db.svc", port: 5432 });

      writeFileSync(done, "");
      const r = await exited;
      expect(r.code).toBe(0);
      expect(r.err).toContain(`created database branch ${name} (PgBranchDatabase) for DATABASE_URL`);
      expect(r.err).toContain(
        `branch ${name} (PgBranchDatabase, DATABASE_URL) Pending — Copying: copying schema from the source`,
      );
      expect(r.err).toContain(`branch ${name} (PgBranchDatabase, DATABASE_URL) Ready — Provisioned`);
      expect(r.err).toMatch(/DATABASE_URL → database sy_shop_abc of branch .* at 127\.0\.0\.1:\d+/);
      expect(r.err).not.toContain(PASSWORD);
      // The session's own branch goes with it; the forward is closed.
      await eventually("the session's branch deleted", async () =>
        (await branchClient("PgBranchDatabase").get({ name, namespace: NS })) === undefined
          ? true
          : undefined,
      );
      expect(await sessionsLeft()).toHaveLength(0);
      const refused = await new Promise<string>((resolve) => {
        const s = connect(rewrite!.port, "127.0.0.1");
        s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? ""));
        s.once("connect", () => (resolve("connected"), s.destroy()));
      });
      expect(refused).toBe("ECONNREFUSED");
    } finally {
      sessions.stop();
    }
  });

  const shared: BranchDatabaseSpec = {
    target: TARGET,
    source: { fromEnv: { name: "DATABASE_URL" } },
    id: "shared-1",
  };

  it("reuses a shared branch whose spec matches, and leaves it for its TTL", async () => {
    await pgBranchDatabaseClient(admin).create({
      metadata: { name: "branch-shared-1", namespace: NS },
      spec: shared,
    });
    await provision("PgBranchDatabase", "branch-shared-1");
    const sessions = simulateSessions();
    try {
      const cfg = configFile({ branches: [{ envVar: "DATABASE_URL", engine: "postgres", id: "shared-1" }] });
      const r = await cli("exec", "-f", cfg, "--", process.execPath, "-e", "process.exit(3)");
      expect(r.code).toBe(3);
      expect(r.err).toContain(
        "sharing existing database branch branch-shared-1 (PgBranchDatabase) for DATABASE_URL",
      );
      expect(sessions.seen.at(-1)!.spec.connectParams?.databaseBranches).toEqual([
        { envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "branch-shared-1" },
      ]);
      expect(
        await pgBranchDatabaseClient(admin).get({ name: "branch-shared-1", namespace: NS }),
      ).toBeDefined();
    } finally {
      sessions.stop();
    }
  });

  it("refuses to share a branch whose spec differs, naming the field, before any session", async () => {
    const cfg = configFile({
      branches: [{ envVar: "DATABASE_URL", engine: "postgres", id: "shared-1", copy: { mode: "all" } }],
    });
    const r = await cli("exec", "-f", cfg, "--", "true");
    expect(r.code).toBe(1);
    expect(r.err).toContain("branches[0] (id shared-1) would share PgBranchDatabase branch-shared-1");
    expect(r.err).toContain('spec.copy.mode is "schema"');
    expect(r.err).toContain("[SWITCHYARD_CLI_BRANCH_CONFLICT]");
    expect(await sessionsLeft()).toHaveLength(0);
    expect(await pgBranchDatabaseClient(admin).get({ name: "branch-shared-1", namespace: NS })).toBeDefined();
  });

  it("fails with the branch's reason when it is Failed, and deletes the session's branch", async () => {
    const cfg = configFile({ branches: [{ envVar: "ORDERS_DB", engine: "mysql" }] });
    const exited = cli("exec", "-f", cfg, "--", "true");
    const cr = await created("MysqlBranchDatabase", (n) => n.endsWith("-orders-db"));
    await setStatus("MysqlBranchDatabase", cr.metadata.name!, {
      phase: "Failed",
      conditions: [
        condition("Ready", "False", "SourceUnreachable", "cannot connect to mysql.shop.svc:3306"),
        condition(
          "Failed",
          "True",
          "SourceUnreachable",
          "cannot connect to mysql.shop.svc:3306: connection refused",
        ),
      ],
    });
    const r = await exited;
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      `database branch ${cr.metadata.name} (MysqlBranchDatabase for ORDERS_DB) failed: SourceUnreachable: ` +
        "cannot connect to mysql.shop.svc:3306: connection refused",
    );
    expect(r.err).toContain("[SWITCHYARD_CLI_BRANCH_FAILED]");
    expect(await sessionsLeft()).toHaveLength(0);
    await eventually(
      "the failed branch deleted",
      async () => (await mysqlBranchDatabaseClient(admin).list({ namespace: NS })).items.length === 0,
    );
  });

  it("gives up after branchTimeoutSeconds, naming it, and deletes the session's branch", async () => {
    const cfg = configFile({
      branches: [{ envVar: "DATABASE_URL", engine: "postgres" }],
      branchTimeoutSeconds: 2,
    });
    const started = Date.now();
    const r = await cli("exec", "-f", cfg, "--", "true");
    expect(r.code).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    expect(r.err).toMatch(
      /database branch mc-[0-9a-f]{16}-database-url .* was not Ready after 2 s \(phase Pending\)/,
    );
    expect(r.err).toContain("raise branchTimeoutSeconds in switchyard.json");
    expect(r.err).toContain("[SWITCHYARD_CLI_BRANCH_TIMEOUT]");
    expect(await sessionsLeft()).toHaveLength(0);
    await eventually("the timed-out branch deleted", async () =>
      (await pgBranchDatabaseClient(admin).list({ namespace: NS })).items.every(
        (b) => b.spec.id === "shared-1",
      ),
    );
  });
});

describe("switchyard branches", () => {
  it("lists both kinds, shows one branch's conditions, and destroys it only when it is gone", async () => {
    const spec: BranchDatabaseSpec = {
      target: "deployment/orders",
      source: { fromEnv: { name: "DATABASE_URL" } },
    };
    await pgBranchDatabaseClient(admin).create({ metadata: { name: "listed", namespace: NS }, spec });
    await mysqlBranchDatabaseClient(admin).create({
      metadata: { name: "listed-my", namespace: NS, finalizers: ["switchyard.dev/branch-sync"] },
      spec,
    });
    await provision("PgBranchDatabase", "listed");
    await setStatus("MysqlBranchDatabase", "listed-my", {
      phase: "Pending",
      sessions: ["mc-0123456789abcdef"],
      conditions: [condition("Ready", "False", "Copying", "copying 3 tables")],
    });

    const list = await cli("branches", "list", "-o", "json");
    expect(list.code).toBe(0);
    const branches = (JSON.parse(list.out) as { branches: Array<Record<string, unknown>> }).branches;
    expect(branches.filter((b) => String(b.name).startsWith("listed"))).toEqual([
      expect.objectContaining({
        name: "listed",
        kind: "PgBranchDatabase",
        phase: "Ready",
        branch: "sy_shop_abc",
        target: "deployment/orders",
        expiresAt: expect.any(String),
        sessions: [],
      }),
      expect.objectContaining({
        name: "listed-my",
        kind: "MysqlBranchDatabase",
        phase: "Pending",
        target: "deployment/orders",
        sessions: ["mc-0123456789abcdef"],
      }),
    ]);
    const table = await cli("branches", "list");
    expect(table.out).toMatch(/^NAME\s+KIND\s+PHASE\s+BRANCH\s+TARGET\s+EXPIRES\s+SESSIONS$/m);
    expect(table.out).toMatch(
      /^listed\s+PgBranchDatabase\s+Ready\s+sy_shop_abc\s+deployment\/orders\s+in \d+m\s+-$/m,
    );
    expect(table.out).toMatch(
      /^listed-my\s+MysqlBranchDatabase\s+Pending\s+-\s+deployment\/orders\s+-\s+mc-0123456789abcdef$/m,
    );

    const status = await cli("branches", "status", "listed-my");
    expect(status.code).toBe(0);
    expect(status.out).toMatch(/^Phase:\s+Pending$/m);
    expect(status.out).toMatch(/^Source:\s+the target's DATABASE_URL$/m);
    expect(status.out).toMatch(/^Ready\s+False\s+Copying\s+\d+s\s+copying 3 tables$/m);
    const statusJson = JSON.parse((await cli("branches", "status", "listed", "-o", "json")).out) as {
      conditions: Array<{ type: string; reason: string }>;
    };
    expect(statusJson.conditions).toEqual([
      expect.objectContaining({ type: "Ready", reason: "Provisioned" }),
    ]);
    expect(JSON.stringify(statusJson)).not.toContain(PASSWORD);

    // A finalizer holds the object: destroy says so and does not call it gone.
    const held = await cli("branches", "destroy", "listed-my", "--wait", "1");
    expect(held.code).toBe(1);
    expect(held.out).toContain("still exists after 1 s (finalizers: switchyard.dev/branch-sync");
    await mysqlBranchDatabaseClient(admin).patch(
      { name: "listed-my", namespace: NS },
      { metadata: { finalizers: [] } },
    );
    await eventually(
      "listed-my gone",
      async () =>
        (await mysqlBranchDatabaseClient(admin).get({ name: "listed-my", namespace: NS })) === undefined,
    );

    const destroyed = await cli("branches", "destroy", "listed", "-o", "json");
    expect(JSON.parse(destroyed.out)).toEqual({
      destroyed: [{ name: "listed", namespace: NS, kind: "PgBranchDatabase", gone: true }],
    });
    const again = await cli("branches", "destroy", "listed");
    expect(again.code).toBe(1);
    expect(again.err).toContain("database branch listed not found in namespace shop");
    expect(again.err).toContain("[SWITCHYARD_CLI_BRANCH_NOT_FOUND]");
  });

  it("asks for --engine when a name exists as both kinds", async () => {
    const spec: BranchDatabaseSpec = { target: TARGET, source: { fromEnv: { name: "DATABASE_URL" } } };
    await pgBranchDatabaseClient(admin).create({ metadata: { name: "twice", namespace: NS }, spec });
    await mysqlBranchDatabaseClient(admin).create({ metadata: { name: "twice", namespace: NS }, spec });
    const r = await cli("branches", "status", "twice");
    expect(r.code).toBe(1);
    expect(r.err).toContain("exists as both PgBranchDatabase and MysqlBranchDatabase");
    expect(r.err).toContain("--engine postgres or --engine mysql");
    const one = await cli("branches", "destroy", "twice", "--engine", "mysql");
    expect(one.out).toContain("database branch twice (MysqlBranchDatabase) deleted");
    expect(await pgBranchDatabaseClient(admin).get({ name: "twice", namespace: NS })).toBeDefined();
  });
});

it.todo(
  "a local app reads the rewritten DATABASE_URL and writes to a real branch through the forward (with the branching controllers and the real agent)",
);
