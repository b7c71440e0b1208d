// `npm run bench -- branching`: time to Ready of database branches, by copy mode and path,
// against the plain tools doing the same copy in the same run (DESIGN §7).
//   - a PostgreSQL 18 branch server whose data directory is on XFS with reflink (a loop file
//     this bench makes, when it runs as root with mkfs.xfs), holding a generated source `bench`;
//   - a PostgreSQL 15 server holding the same source elsewhere (streamed: pg_dump | psql);
//   - real API servers (`primary`, `east`), the branching controller on east with the `server`
//     provisioner, the branch sync controller on the Primary.
//   - then, on a cluster of its own with a real node, the `pod` provisioner (branching-pods.ts;
//     `--no-pods` leaves it out).
// Plain tools: CREATE DATABASE … TEMPLATE (clone, and the default WAL_LOG), pg_dump | psql
// (all rows, schema only). Switchyard: a CR created on east (Default) per mode and path, and
// one created on the Primary (sync to east and back).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import pg from "pg";
import { pino } from "pino";
import { pgBranchDatabaseClient, type BranchDatabase } from "../../proto/api/v1alpha1/index.js";
import { BranchController } from "../../control-plane/src/branching/branch-controller.js";
import { BranchSyncController } from "../../control-plane/src/branching/sync/branch-sync-controller.js";
import { PgServerBranches } from "../../control-plane/src/branching/postgres/pg-server-branches.js";
import type { WorkloadClusters } from "../../control-plane/src/primary/workload-clusters.js";
import { installCrds } from "../../control-plane/src/runtime/index.js";
import { startPostgres, type PostgresServer } from "../../test/env/databases/postgres-server.js";
import { startClusterSet } from "../../test/env/index.js";
import { cpus, totalmem } from "node:os";
import { podBranchTimes, type PodBranchTimes } from "./branching-pods.js";
import { printGoals } from "../support/goal.js";
import { pct, writeResult } from "../support/stats-support.js";

export interface BranchingBenchOptions {
  /** Size of the generated source database, MB. */
  sizeMb: number;
  /** Runs per measured copy. */
  runs: number;
  /** Also the `pod` provisioner on a real node (branching-pods.ts). */
  pods: boolean;
}

export const defaultBranchingBench: BranchingBenchOptions = { sizeMb: 100, runs: 5, pods: true };

const NS = "bench";
const PASSWORD = "bench-source-password";
const logger = pino({ level: "warn" });

interface ReflinkFs {
  dir: string | undefined;
  why: string;
  cleanup(): void;
}

/** An XFS file system with reflink in a loop file, so PostgreSQL 18 can clone; else why not. */
function reflinkFs(): ReflinkFs {
  const none = (why: string): ReflinkFs => ({ dir: undefined, why, cleanup: () => undefined });
  if (process.getuid?.() !== 0)
    return none("not root: no loop mount, data directory on the default file system");
  const base = mkdtempSync(join(tmpdir(), "switchyard-bench-xfs-"));
  // PostgreSQL runs as an unprivileged user when this runs as root: it must pass through.
  execFileSync("chmod", ["711", base]);
  const image = join(base, "xfs.img");
  const dir = join(base, "mnt");
  try {
    execFileSync("truncate", ["-s", "8G", image]);
    execFileSync("mkfs.xfs", ["-q", "-m", "reflink=1", image]);
    execFileSync("mkdir", [dir]);
    execFileSync("mount", ["-o", "loop", image, dir]);
    execFileSync("chmod", ["755", dir]);
  } catch (err) {
    rmSync(base, { recursive: true, force: true });
    return none(`no XFS loop file system (${(err as Error).message.split("\n")[0]}); install xfsprogs`);
  }
  return {
    dir,
    why: "data directory on XFS (reflink=1) in a loop file",
    cleanup: () => {
      try {
        execFileSync("umount", [dir]);
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    },
  };
}

async function sql<T = void>(url: string, text: string | string[]): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    let rows: T[] = [];
    for (const t of Array.isArray(text) ? text : [text]) rows = (await c.query(t)).rows as T[];
    return rows;
  } finally {
    await c.end();
  }
}

const dbUrl = (s: PostgresServer, db: string, user = "app", password = PASSWORD) =>
  `postgres://${user}:${password}@127.0.0.1:${s.port}/${db}`;

/** Source database `bench` of about `mb` MB: two tables with an index each and a foreign key. */
async function generate(s: PostgresServer, mb: number): Promise<number> {
  await sql(s.adminUrl, [`CREATE ROLE app LOGIN PASSWORD '${PASSWORD}'`, "CREATE DATABASE bench OWNER app"]);
  const rows = Math.round(mb * 4_200);
  await sql(dbUrl(s, "bench"), [
    "CREATE TABLE customers (id serial PRIMARY KEY, tenant int NOT NULL, name text NOT NULL)",
    "CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers(id), note text NOT NULL)",
    `INSERT INTO customers (tenant, name) SELECT g % 50, 'customer ' || g FROM generate_series(1, ${Math.ceil(rows / 10)}) g`,
    `INSERT INTO orders (customer_id, note) SELECT 1 + g % ${Math.ceil(rows / 10)}, repeat(md5(g::text), 5) FROM generate_series(1, ${rows}) g`,
    "CREATE INDEX orders_customer ON orders (customer_id)",
    "ANALYZE",
  ]);
  const [r] = await sql<{ size: string }>(s.adminUrl, "SELECT pg_database_size('bench') AS size");
  return Number(r!.size);
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** `pg_dump <args> src | psql dst`, with the passwords in the environment. */
function dumpRestore(src: PostgresServer, dst: PostgresServer, db: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const dump = spawn(
      "pg_dump",
      [
        ...args,
        "--no-owner",
        "--no-privileges",
        "-h",
        "127.0.0.1",
        "-p",
        String(src.port),
        "-U",
        "app",
        "bench",
      ],
      {
        env: { ...process.env, PGPASSWORD: PASSWORD },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const admin = new URL(dst.adminUrl);
    const restore = spawn(
      "psql",
      ["-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", String(dst.port), "-U", admin.username, db],
      {
        env: { ...process.env, PGPASSWORD: decodeURIComponent(admin.password) },
        stdio: ["pipe", "ignore", "inherit"],
      },
    );
    dump.stdout.pipe(restore.stdin);
    let left = 2;
    const done = (name: string) => (code: number | null) => {
      if (code !== 0) reject(new Error(`${name} exited ${code}`));
      else if (--left === 0) resolve();
    };
    dump.on("exit", done("pg_dump"));
    restore.on("exit", done("psql"));
  });
}

async function plainTools(o: BranchingBenchOptions, pg18: PostgresServer, pg15: PostgresServer) {
  const out: Record<string, number[]> = { clone: [], walLog: [], dumpAll: [], dumpSchema: [] };
  for (let i = 0; i < o.runs; i++) {
    out.clone!.push(
      await timed(() =>
        sql(pg18.adminUrl, [
          "SET file_copy_method = clone",
          `CREATE DATABASE plain_clone_${i} TEMPLATE bench STRATEGY FILE_COPY`,
        ]),
      ),
    );
    out.walLog!.push(await timed(() => sql(pg18.adminUrl, `CREATE DATABASE plain_wal_${i} TEMPLATE bench`)));
    for (const [key, args] of [
      ["dumpAll", []],
      ["dumpSchema", ["--schema-only"]],
    ] as const) {
      const db = `plain_${key.toLowerCase()}_${i}`;
      out[key]!.push(
        await timed(async () => {
          await sql(pg18.adminUrl, `CREATE DATABASE ${db}`);
          await dumpRestore(pg15, pg18, db, [...args]);
        }),
      );
    }
    await sql(
      pg18.adminUrl,
      [`plain_clone_${i}`, `plain_wal_${i}`, `plain_dumpall_${i}`, `plain_dumpschema_${i}`].map(
        (d) => `DROP DATABASE ${d}`,
      ),
    );
  }
  return out;
}

/** The provisioner's own time, from the Ready condition's "made by … copy in N ms". */
const copyMsOf = (b: BranchDatabase): number =>
  Number(
    / in (\d+) ms$/.exec(b.status?.conditions?.find((c) => c.type === "Ready")?.message ?? "")?.[1] ?? NaN,
  );

/** Creates a branch CR with `client` and resolves with ms to Ready (polled every 5 ms) and the provisioner's part of it. */
async function timeToReady(
  client: ReturnType<typeof pgBranchDatabaseClient>,
  name: string,
  spec: BranchDatabase["spec"],
): Promise<{ ms: number; copyMs: number }> {
  const t0 = performance.now();
  await client.create({ metadata: { name, namespace: NS }, spec });
  for (;;) {
    const b = await client.get({ namespace: NS, name });
    if (b?.status?.phase === "Ready") return { ms: performance.now() - t0, copyMs: copyMsOf(b) };
    if (b?.status?.phase === "Failed")
      throw new Error(`${name} Failed: ${JSON.stringify(b.status.conditions)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function deleted(client: ReturnType<typeof pgBranchDatabaseClient>, name: string): Promise<void> {
  await client.delete({ namespace: NS, name });
  while (await client.get({ namespace: NS, name })) await new Promise((r) => setTimeout(r, 20));
}

export async function runBranchingBench(o: BranchingBenchOptions): Promise<void> {
  const fs = reflinkFs();
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}\nPostgreSQL 18 branch server: ${fs.why}`,
  );
  const [pg18, pg15, set] = await Promise.all([
    startPostgres({ version: 18, ...(fs.dir ? { dataParent: fs.dir } : {}) }),
    startPostgres({ version: 15 }),
    startClusterSet({ clusters: ["primary", "east"], controllerManager: false }),
  ]);
  const stop = new AbortController();
  const running: Promise<void>[] = [];
  let measured: { plain: Record<string, number[]>; ours: Record<string, number[]> } | undefined;
  try {
    const [size18] = await Promise.all([generate(pg18, o.sizeMb), generate(pg15, o.sizeMb)]);
    console.log(`source: ${(size18 / 1e6).toFixed(0)} MB on each server; ${o.runs} runs per copy`);
    const plain = await plainTools(o, pg18, pg15);

    const primary: KubeConfig = set.get("primary").kubeConfig();
    const east: KubeConfig = set.get("east").kubeConfig();
    await Promise.all([installCrds(primary), installCrds(east)]);
    const clusters: WorkloadClusters = {
      topology: () => ({ primaryClusterId: "primary", clusters: [{ name: "east", isDefault: true }] }),
      kubeConfig: (c) => (c === "east" ? east : undefined),
    };
    running.push(
      new BranchController({
        kubeConfig: east,
        provisioners: { PgBranchDatabase: new PgServerBranches({ adminUrl: pg18.adminUrl, logger }) },
        provisionerHint: "",
        logger,
      }).start(stop.signal),
      new BranchSyncController({ primaryKubeConfig: primary, clusters, logger }).start(stop.signal),
    );
    const source = (s: PostgresServer) => ({
      host: "127.0.0.1",
      port: s.port,
      database: "bench",
      user: "app",
      passwordSecretRef: { name: "bench-source", key: "password" },
    });
    for (const kc of [primary, east]) {
      const { CoreV1Api } = await import("@kubernetes/client-node");
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: NS } } });
      await core.createNamespacedSecret({
        namespace: NS,
        body: { metadata: { name: "bench-source" }, stringData: { password: PASSWORD } },
      });
    }
    const onEast = pgBranchDatabaseClient(east);
    const onPrimary = pgBranchDatabaseClient(primary);
    const cases = {
      sameAll: { spec: { source: source(pg18), copy: { mode: "all" as const } }, client: onEast },
      sameSchema: { spec: { source: source(pg18), copy: { mode: "schema" as const } }, client: onEast },
      streamAll: { spec: { source: source(pg15), copy: { mode: "all" as const } }, client: onEast },
      streamSchema: { spec: { source: source(pg15), copy: { mode: "schema" as const } }, client: onEast },
      syncSchema: { spec: { source: source(pg18), copy: { mode: "schema" as const } }, client: onPrimary },
    };
    const ours: Record<string, number[]> = {};
    for (let i = 0; i < o.runs; i++) {
      for (const [key, c] of Object.entries(cases)) {
        const name = `${key.toLowerCase()}-${i}`;
        const t = await timeToReady(c.client, name, { target: "deployment/unused", ...c.spec });
        (ours[key] ??= []).push(t.ms);
        (ours[`${key}Copy`] ??= []).push(t.copyMs);
        await deleted(c.client, name);
      }
    }
    measured = { plain, ours };
  } finally {
    stop.abort();
    await Promise.allSettled(running);
    await Promise.allSettled([set.stop(), pg18.stop(), pg15.stop()]);
    fs.cleanup();
  }
  const pods = o.pods ? await podBranchTimes(o.sizeMb, o.runs, logger) : undefined;
  report(o, fs.why, measured!, pods);
}

function report(
  o: BranchingBenchOptions,
  fsWhy: string,
  { plain, ours }: { plain: Record<string, number[]>; ours: Record<string, number[]> },
  pods: PodBranchTimes | undefined,
): void {
  const p50 = (xs: number[]) => pct(xs, 50);
  console.log(
    `results: ${writeResult("branching", { sizeMb: o.sizeMb, runs: o.runs, fs: fsWhy, plain, switchyard: ours, pods })}`,
  );
  const row = (label: string, xs: number[]) =>
    console.log(
      `${label.padEnd(50)} p50 ${p50(xs).toFixed(0).padStart(7)} ms   min ${Math.min(...xs)
        .toFixed(0)
        .padStart(7)} ms   max ${Math.max(...xs)
        .toFixed(0)
        .padStart(7)} ms`,
    );
  row("plain: CREATE DATABASE … TEMPLATE (clone)", plain.clone!);
  row("plain: CREATE DATABASE … TEMPLATE (WAL_LOG)", plain.walLog!);
  row("plain: pg_dump | psql, all (15 → 18)", plain.dumpAll!);
  row("plain: pg_dump --schema-only | psql (15 → 18)", plain.dumpSchema!);
  row("switchyard: same server, all → Ready", ours.sameAll!);
  row("switchyard: same server, schema → Ready", ours.sameSchema!);
  row("switchyard: stream, all → Ready", ours.streamAll!);
  row("switchyard: stream, schema → Ready", ours.streamSchema!);
  row("switchyard: via the Primary (sync), schema → Ready", ours.syncSchema!);
  // Of each time to Ready, what the provisioner took (the rest: the controller's API round trips).
  for (const key of ["sameAll", "sameSchema", "streamAll", "streamSchema"])
    console.log(
      `  ${key.padEnd(14)} provisioner p50 ${p50(ours[`${key}Copy`]!).toFixed(0).padStart(6)} ms of ${p50(
        ours[key]!,
      )
        .toFixed(0)
        .padStart(6)} ms to Ready`,
    );
  if (pods) {
    console.log(
      `pod provisioner: source pod Ready (initdb + ${o.sizeMb} MB generated) in ${(pods.sourceReadyMs / 1000).toFixed(1)} s`,
    );
    row("switchyard: pod, empty → Ready (pod start + initdb)", pods.empty);
    row("switchyard: pod, schema → Ready", pods.schema);
    row("switchyard: pod, all → Ready", pods.all);
  } else console.log("pod provisioner: not measured (--no-pods)");
  const goal = (name: string, value: number, unit: string, target: number, digits = 0) =>
    printGoals([{ name, value, unit, op: "<=", target, digits }]);
  goal("branch-same-server-clone-p50", p50(ours.sameAll!), "ms", 250);
  goal("branch-schema-p50", Math.max(p50(ours.sameSchema!), p50(ours.streamSchema!)), "ms", 1000);
  goal("branch-stream-all-vs-pg-dump", p50(ours.streamAll!) / p50(plain.dumpAll!), "x", 1.2, 2);
  goal("branch-sync-added-p50", Math.max(0, p50(ours.syncSchema!) - p50(ours.sameSchema!)), "ms", 200);
}
