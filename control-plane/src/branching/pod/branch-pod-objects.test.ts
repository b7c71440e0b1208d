import { describe, expect, it } from "vitest";
import type { BranchCreateRequest } from "../branch-provisioner.js";
import {
  BRANCH_POD_LABEL,
  BRANCH_POD_SPEC_ANNOTATION,
  branchPodName,
  branchPodObjects,
  INIT_DIR,
  MARIADB_POD_ENGINE,
  POSTGRES_POD_ENGINE,
} from "./branch-pod-objects.js";
import { planCopy } from "../copy-plan.js";

const SOURCE_PASSWORD = "S0urce-Pa55word";
const BRANCH_PASSWORD = "BranchPa55wordBranchPa55wordBranchPa55wo";
const request: BranchCreateRequest = {
  kind: "PgBranchDatabase",
  cr: { namespace: "shop", name: "feature", uid: "u-1" },
  copy: { mode: "schema", filters: [] },
  plan: planCopy({ mode: "schema" }),
  source: { host: "db", port: 5432, database: "shop", user: "app", password: SOURCE_PASSWORD, params: {} },
  identifiers: {
    database: "sy_feature_abcdefghijkl",
    user: "sy_feature_abcdefghijkl",
    password: BRANCH_PASSWORD,
  },
};

describe("branchPodObjects", () => {
  const o = branchPodObjects(POSTGRES_POD_ENGINE, request, { image: "postgres:17" });

  it("names every object from the database name, labels it and makes the CR its owner", () => {
    expect(o.name).toBe("sy-feature-abcdefghijkl");
    expect(branchPodName(`sy_${"x".repeat(70)}`)).toHaveLength(63);
    for (const obj of [o.pod, o.service, o.seedSecret]) {
      expect(obj.metadata?.namespace).toBe("shop");
      expect(obj.metadata?.labels?.[BRANCH_POD_LABEL]).toBe(o.name);
      expect(obj.metadata?.labels?.["switchyard.dev/branch"]).toBe("pgbranchdatabase.feature");
      expect(obj.metadata?.ownerReferences).toEqual([
        {
          apiVersion: "switchyard.dev/v1alpha1",
          kind: "PgBranchDatabase",
          name: "feature",
          uid: "u-1",
          blockOwnerDeletion: false,
        },
      ]);
    }
    expect(o.seedSecret.metadata?.name).toBe("sy-feature-abcdefghijkl-seed");
    expect(o.service.spec).toMatchObject({
      type: "ClusterIP",
      selector: { [BRANCH_POD_LABEL]: o.name },
      ports: [{ port: 5432, targetPort: 5432 }],
    });
  });

  it("a locked-down pod of the image's contract: passwords only by reference, the seed script executable in initdb.d", () => {
    const spec = o.pod.spec!;
    const c = spec.containers[0]!;
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 999,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(c.terminationMessagePolicy).toBe("FallbackToLogsOnError");
    expect(c.readinessProbe?.tcpSocket?.port).toBe(5432);
    expect(c.resources).toEqual({ requests: { cpu: "50m", memory: "128Mi" } });
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e]));
    expect(env.POSTGRES_USER?.value).toBe("sy_feature_abcdefghijkl");
    expect(env.POSTGRES_DB?.value).toBe("sy_feature_abcdefghijkl");
    expect(env.POSTGRES_PASSWORD?.valueFrom?.secretKeyRef).toEqual({
      name: "feature-pgbranch",
      key: "password",
    });
    expect(env.SWITCHYARD_SOURCE_PASSWORD?.valueFrom?.secretKeyRef).toEqual({
      name: "sy-feature-abcdefghijkl-seed",
      key: "source-password",
    });
    expect(c.volumeMounts).toContainEqual({ name: "seed", mountPath: INIT_DIR, readOnly: true });
    expect(spec.volumes).toContainEqual({ name: "data", emptyDir: {} });
    expect(spec.volumes?.find((v) => v.name === "seed")?.secret?.items).toEqual([
      { key: "seed.sh", path: "50-switchyard-seed.sh", mode: 0o555 },
    ]);
    const pod = JSON.stringify(o.pod) + JSON.stringify(o.service);
    expect(pod).not.toContain(SOURCE_PASSWORD);
    expect(pod).not.toContain(BRANCH_PASSWORD);
    const data = o.seedSecret.data!;
    expect(Buffer.from(data["source-password"]!, "base64").toString()).toBe(SOURCE_PASSWORD);
    expect(Buffer.from(data["seed.sh"]!, "base64").toString()).not.toContain(SOURCE_PASSWORD);
  });

  it("the spec digest follows the image, the resources and the script", () => {
    const digest = (x: typeof o) => x.pod.metadata?.annotations?.[BRANCH_POD_SPEC_ANNOTATION];
    expect(digest(branchPodObjects(POSTGRES_POD_ENGINE, request, { image: "postgres:17" }))).toBe(digest(o));
    expect(digest(branchPodObjects(POSTGRES_POD_ENGINE, request, { image: "postgres:16" }))).not.toBe(
      digest(o),
    );
    const all = { ...request, copy: { mode: "all" as const, filters: [] }, plan: planCopy({ mode: "all" }) };
    expect(digest(branchPodObjects(POSTGRES_POD_ENGINE, all, { image: "postgres:17" }))).not.toBe(digest(o));
    const limited = branchPodObjects(POSTGRES_POD_ENGINE, request, {
      image: "postgres:17",
      resources: { limits: { memory: "1Gi" } },
      runAsUser: 70,
    });
    expect(digest(limited)).not.toBe(digest(o));
    expect(limited.pod.spec?.securityContext?.runAsUser).toBe(70);
  });

  it("a MariaDB pod: the mariadb image's contract, a generated root password for localhost only, port 3306", () => {
    const mysqlRequest: BranchCreateRequest = {
      ...request,
      kind: "MysqlBranchDatabase",
      source: { ...request.source, port: 3306 },
    };
    const m = branchPodObjects(MARIADB_POD_ENGINE, mysqlRequest, { image: "mariadb:11" });
    const c = m.pod.spec!.containers[0]!;
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e]));
    expect(env.MARIADB_USER?.value).toBe("sy_feature_abcdefghijkl");
    expect(env.MARIADB_DATABASE?.value).toBe("sy_feature_abcdefghijkl");
    expect(env.MARIADB_PASSWORD?.valueFrom?.secretKeyRef).toEqual({
      name: "feature-mysqlbranch",
      key: "password",
    });
    expect(env.MARIADB_ROOT_PASSWORD?.valueFrom?.secretKeyRef).toEqual({
      name: "sy-feature-abcdefghijkl-seed",
      key: "root-password",
    });
    expect(env.MARIADB_ROOT_HOST?.value).toBe("localhost");
    expect(c.readinessProbe?.tcpSocket?.port).toBe(3306);
    expect(c.volumeMounts).toContainEqual({ name: "data", mountPath: "/var/lib/mysql" });
    expect(m.service.spec?.ports).toEqual([{ name: "mysql", port: 3306, targetPort: 3306, protocol: "TCP" }]);
    expect(m.pod.metadata?.labels?.["switchyard.dev/branch"]).toBe("mysqlbranchdatabase.feature");
    const data = m.seedSecret.data!;
    const root = Buffer.from(data["root-password"]!, "base64").toString();
    expect(root).toMatch(/^[\w-]{32}$/);
    const script = Buffer.from(data["seed.sh"]!, "base64").toString();
    expect(script).toContain("mariadb-dump");
    for (const secret of [SOURCE_PASSWORD, BRANCH_PASSWORD, root]) {
      expect(JSON.stringify(m.pod) + script).not.toContain(secret);
    }
    // A new root password each time, the same spec.
    const again = branchPodObjects(MARIADB_POD_ENGINE, mysqlRequest, { image: "mariadb:11" });
    expect(again.seedSecret.data!["root-password"]).not.toBe(data["root-password"]);
    expect(again.pod.metadata?.annotations?.[BRANCH_POD_SPEC_ANNOTATION]).toBe(
      m.pod.metadata?.annotations?.[BRANCH_POD_SPEC_ANNOTATION],
    );
  });
});
