import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import { parseFeatureFlags, type ControlPlaneMode } from "../runtime/index.js";
import { branchingFlags } from "./branching-options.js";

/** The branching flags alone, as the process parses them. */
const parse = (argv: string[], mode: ControlPlaneMode = "member") =>
  parseFeatureFlags(branchingFlags, argv, mode);
const member: string[] = [];
const PASSWORD = "Adm1nPa55w0rd";

function optionError(argv: string[], mode: ControlPlaneMode = "member"): OptionError {
  try {
    parse(argv, mode);
  } catch (err) {
    expect(err).toBeInstanceOf(OptionError);
    return err as OptionError;
  }
  throw new Error("expected an OptionError");
}

describe("branching options", () => {
  it("defaults to no Default flag and no branch servers", () => {
    expect(parse(member)).toEqual({
      defaultCluster: false,
      postgres: undefined,
      mysql: undefined,
      serverAliases: [],
      clientBinDir: undefined,
    });
  });

  it("reads admin URLs from files and parses the advertised addresses and aliases", () => {
    const dir = testScratchDir("branching-options");
    const pg = join(dir, "pg-url");
    const my = join(dir, "my-url");
    writeFileSync(pg, `postgres://admin:${PASSWORD}@10.0.0.5:5432/postgres\n`);
    writeFileSync(my, `mysql://root:${PASSWORD}@10.0.0.6:3306/`);
    const o = parse([
      ...member,
      "--default-cluster",
      "--branch-postgres-url-file",
      pg,
      "--branch-postgres-advertise",
      "branches.data.svc:5432",
      "--branch-mysql-url-file",
      my,
      "--branch-server-aliases",
      "branches.data.svc, branches.data",
    ]);
    expect(o.defaultCluster).toBe(true);
    expect(o.postgres).toEqual({
      adminUrl: `postgres://admin:${PASSWORD}@10.0.0.5:5432/postgres`,
      advertise: { host: "branches.data.svc", port: 5432 },
    });
    expect(o.mysql).toEqual({ adminUrl: `mysql://root:${PASSWORD}@10.0.0.6:3306/`, advertise: undefined });
    expect(o.serverAliases).toEqual(["branches.data.svc", "branches.data"]);
  });

  it("names the flag and never the URL when a file is missing or holds something else", () => {
    const dir = testScratchDir("branching-options");
    const missing = optionError([...member, "--branch-postgres-url-file", join(dir, "nope")]);
    expect(missing.option).toBe("--branch-postgres-url-file");
    expect(missing.message).toMatch(/cannot read .*nope: ENOENT/);
    const wrong = join(dir, "wrong");
    writeFileSync(wrong, `mysql://root:${PASSWORD}@db:3306/`);
    const e = optionError([...member, "--branch-postgres-url-file", wrong]);
    expect(e.option).toBe("--branch-postgres-url-file");
    expect(e.message).toMatch(/must hold one postgres:\/\/ or postgresql:\/\/ URL/);
    expect(e.message).not.toContain(PASSWORD);
  });

  it("refuses an advertised address without its server, a bad address, and --default-cluster on a primary-only control plane", () => {
    const dir = testScratchDir("branching-options");
    expect(optionError([...member, "--branch-mysql-advertise", "db:3306"]).option).toBe(
      "--branch-mysql-advertise",
    );
    const pg = join(dir, "pg");
    writeFileSync(pg, "postgres://admin@db/postgres");
    expect(
      optionError([...member, "--branch-postgres-url-file", pg, "--branch-postgres-advertise", "db"]).message,
    ).toMatch(/is not host:port/);
    expect(optionError(["--default-cluster"], "primary").option).toBe("--default-cluster");
  });

  it("chooses the pod provisioner per engine, with its image", () => {
    const dir = testScratchDir("branching-options");
    const my = join(dir, "my-url");
    writeFileSync(my, `mysql://root:${PASSWORD}@10.0.0.6:3306/`);
    const o = parse([
      ...member,
      "--branch-provisioner-postgres",
      "pod",
      "--branch-pod-image-postgres",
      "postgres:17",
      "--branch-provisioner-mysql",
      "server",
      "--branch-mysql-url-file",
      my,
    ]);
    expect(o.postgresPod).toEqual({ image: "postgres:17" });
    expect(o.postgres).toBeUndefined();
    expect(o.mysql?.adminUrl).toContain("10.0.0.6");
    expect(o.mysqlPod).toBeUndefined();
    const mysqlPod = parse([
      ...member,
      "--branch-provisioner-mysql",
      "pod",
      "--branch-pod-image-mysql",
      " mariadb:11 ",
    ]);
    expect(mysqlPod.mysqlPod).toEqual({ image: "mariadb:11" });
    expect(mysqlPod.mysql).toBeUndefined();
    expect(optionError([...member, "--branch-provisioner-mysql", "pod"]).option).toBe(
      "--branch-pod-image-mysql",
    );
  });

  it("refuses a pod provisioner without an image, a server one without its URL file, and flags of the other provisioner", () => {
    const dir = testScratchDir("branching-options");
    const pg = join(dir, "pg");
    writeFileSync(pg, `postgres://admin:${PASSWORD}@db/postgres`);
    const noImage = optionError([...member, "--branch-provisioner-postgres", "pod"]);
    expect(noImage.option).toBe("--branch-pod-image-postgres");
    expect(noImage.message).toMatch(/is needed with --branch-provisioner-postgres pod/);
    const noUrl = optionError([...member, "--branch-provisioner-mysql", "server"]);
    expect(noUrl.option).toBe("--branch-provisioner-mysql");
    expect(noUrl.message).toMatch(/server needs --branch-mysql-url-file/);
    const both = optionError([
      ...member,
      "--branch-provisioner-postgres",
      "pod",
      "--branch-pod-image-postgres",
      "postgres:17",
      "--branch-postgres-url-file",
      pg,
    ]);
    expect(both.option).toBe("--branch-postgres-url-file");
    expect(both.message).not.toContain(PASSWORD);
    expect(optionError([...member, "--branch-pod-image-postgres", "postgres:17"]).message).toMatch(
      /is for the pod provisioner: add --branch-provisioner-postgres pod/,
    );
    expect(optionError([...member, "--branch-provisioner-postgres", "pods"]).message).toMatch(
      /must be server or pod, got "pods"/,
    );
  });
});
