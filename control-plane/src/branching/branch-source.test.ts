import type { V1Deployment, V1EnvVar } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { BranchDatabaseSpec } from "../../../proto/api/v1alpha1/index.js";
import type { TargetSource } from "../member/target-resolver.js";
import { BranchSourceError, resolveBranchSource, type KeyReader } from "./branch-source.js";

const SECRET = "s3cr3t-Pa55";

function targets(env: V1EnvVar[] | undefined): TargetSource {
  const d: V1Deployment | undefined =
    env === undefined
      ? undefined
      : { spec: { selector: {}, template: { spec: { containers: [{ name: "app", env }] } } } };
  return {
    deployment: (_ns, name) => (name === "shop" ? d : undefined),
    statefulSet: () => undefined,
    pod: () => undefined,
    pods: () => [],
  };
}

const keys: KeyReader = {
  secretKey: async (_ns, name, key) =>
    name === "db" && key === "url"
      ? `postgres://app:${SECRET}@pg.data:5432/shop`
      : name === "pw" && key === "password"
        ? SECRET
        : undefined,
  configMapKey: async (_ns, name, key) =>
    name === "cfg" && key === "url" ? "postgres://app@pg.data/shop?sslmode=require" : undefined,
};

const fromEnv = (name = "DATABASE_URL"): BranchDatabaseSpec => ({
  target: "deployment/shop",
  source: { fromEnv: { name } },
});

async function failure(p: Promise<unknown>): Promise<BranchSourceError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BranchSourceError);
  return err as BranchSourceError;
}

describe("resolveBranchSource", () => {
  it("reads the URL from a plain value, a Secret key or a ConfigMap key of the target's env", async () => {
    const plain = await resolveBranchSource(
      "PgBranchDatabase",
      "dev",
      fromEnv(),
      targets([{ name: "DATABASE_URL", value: "postgres://u:p@h:6543/db" }]),
      keys,
    );
    expect(plain).toMatchObject({ host: "h", port: 6543, database: "db", user: "u", password: "p" });
    const secret = await resolveBranchSource(
      "PgBranchDatabase",
      "dev",
      fromEnv(),
      targets([{ name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: "db", key: "url" } } }]),
      keys,
    );
    expect(secret).toMatchObject({ host: "pg.data", database: "shop", password: SECRET });
    const map = await resolveBranchSource(
      "PgBranchDatabase",
      "dev",
      fromEnv(),
      targets([{ name: "DATABASE_URL", valueFrom: { configMapKeyRef: { name: "cfg", key: "url" } } }]),
      keys,
    );
    expect(map).toMatchObject({ host: "pg.data", port: 5432, params: { sslmode: "require" } });
  });

  it("takes the last entry of a variable set twice, as the kubelet does", async () => {
    const s = await resolveBranchSource(
      "PgBranchDatabase",
      "dev",
      fromEnv(),
      targets([
        { name: "DATABASE_URL", value: "postgres://u@first/db" },
        { name: "DATABASE_URL", value: "postgres://u@second/db" },
      ]),
      keys,
    );
    expect(s.host).toBe("second");
  });

  it("explains a missing target, variable or key, and never shows the password", async () => {
    const noTarget = await failure(
      resolveBranchSource("PgBranchDatabase", "dev", fromEnv(), targets(undefined), keys),
    );
    expect(noTarget).toMatchObject({ reason: "TargetNotFound", terminal: false });
    expect(noTarget.message).toMatch(/^spec\.target: deployment shop not found in namespace dev/);
    const noVar = await failure(
      resolveBranchSource("PgBranchDatabase", "dev", fromEnv("DB"), targets([]), keys),
    );
    expect(noVar).toMatchObject({ reason: "SourceVariableMissing", terminal: true });
    expect(noVar.message).toMatch(
      /spec\.source\.fromEnv\.name: deployment\/shop \(container app\) has no env entry DB/,
    );
    const noKey = await failure(
      resolveBranchSource(
        "PgBranchDatabase",
        "dev",
        fromEnv(),
        targets([{ name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: "gone", key: "url" } } }]),
        keys,
      ),
    );
    expect(noKey).toMatchObject({ reason: "SourceVariableMissing", terminal: false });
    const notUrl = await failure(
      resolveBranchSource(
        "PgBranchDatabase",
        "dev",
        fromEnv(),
        targets([{ name: "DATABASE_URL", value: `host=pg password=${SECRET}` }]),
        keys,
      ),
    );
    expect(notUrl).toMatchObject({ reason: "SourceInvalid", terminal: true });
    expect(notUrl.message).not.toContain(SECRET);
    const wrongEngine = await failure(
      resolveBranchSource(
        "MysqlBranchDatabase",
        "dev",
        fromEnv(),
        targets([{ name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: "db", key: "url" } } }]),
        keys,
      ),
    );
    expect(wrongEngine.message).toMatch(/scheme postgres:\/\/ is not supported/);
    expect(wrongEngine.message).not.toContain(SECRET);
    const expansion = await failure(
      resolveBranchSource(
        "PgBranchDatabase",
        "dev",
        fromEnv(),
        targets([{ name: "DATABASE_URL", value: "postgres://u:$(PW)@h/db" }]),
        keys,
      ),
    );
    expect(expansion.message).toMatch(/\$\(\.\.\.\)/);
  });

  it("builds an explicit source, its password from the named Secret key", async () => {
    const spec: BranchDatabaseSpec = {
      target: "deployment/shop",
      source: {
        host: "pg.data",
        database: "shop",
        user: "app",
        passwordSecretRef: { name: "pw", key: "password" },
      },
    };
    expect(await resolveBranchSource("PgBranchDatabase", "dev", spec, targets([]), keys)).toEqual({
      host: "pg.data",
      port: 5432,
      database: "shop",
      user: "app",
      password: SECRET,
      params: {},
    });
    const mysql = await resolveBranchSource(
      "MysqlBranchDatabase",
      "dev",
      { ...spec, source: { ...spec.source, passwordSecretRef: undefined } },
      targets([]),
      keys,
    );
    expect(mysql).toMatchObject({ port: 3306, password: "" });
    const missing = await failure(
      resolveBranchSource(
        "PgBranchDatabase",
        "dev",
        { ...spec, source: { ...spec.source, passwordSecretRef: { name: "pw", key: "nope" } } },
        targets([]),
        keys,
      ),
    );
    expect(missing).toMatchObject({ reason: "SourcePasswordMissing", terminal: false });
  });
});
