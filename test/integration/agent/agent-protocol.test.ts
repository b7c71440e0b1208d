// The real agent process against a real API server, spoken to over the session protocol:
// env equals the pod's kubelet-resolved env (with include/exclude and the DB-branch
// rewrite), files from a ConfigMap mount read back in pieces, the container's mounts listed,
// paths the API cannot answer get clear errors — all with a narrow RBAC identity like a
// sidecar's.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import { AgentClient } from "../../peers/agent-client.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { AgentProcess } from "./agent-process.js";
import { eventually } from "../../support/poll.js";

const ns = "shop";
const SECRET = "per-agent-secret-7f3a";
const BRANCH_SECRET = "branch-session-secret-91c2";
let set: ClusterSet;
let agent: AgentProcess;
let metricsPort = 0;
const clients: AgentClient[] = [];
let dir: string | undefined;

async function connect(session: string, secret = SECRET): Promise<AgentClient> {
  const c = await AgentClient.connect(agent.url(session), secret);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  const east = set.get("east");
  const kc = east.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  await core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: { name: "app-config" },
      data: { LOG_LEVEL: "debug", "settings.yaml": "port: 8080\nname: shop\n" },
    },
  });
  await core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: "db" },
      stringData: { url: "postgres://db:5432/shop?sslmode=disable", password: "s3cret" },
    },
  });
  await core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: "cart-api" }, spec: { ports: [{ name: "http", port: 80 }] } },
  });
  // The agent's own identity: read its pod and what the pod refers to, nothing else.
  const agentUser = await east.mintUser("switchyard-agent");
  await rbac.createNamespacedRole({
    namespace: ns,
    body: {
      metadata: { name: "agent" },
      rules: [
        { apiGroups: [""], resources: ["pods", "configmaps", "secrets"], verbs: ["get"] },
        { apiGroups: [""], resources: ["services"], verbs: ["list"] },
      ],
    },
  });
  await rbac.createNamespacedRole({
    namespace: "default",
    body: {
      metadata: { name: "agent-master-service" },
      rules: [{ apiGroups: [""], resources: ["services"], resourceNames: ["kubernetes"], verbs: ["get"] }],
    },
  });
  for (const [namespace, role] of [
    [ns, "agent"],
    ["default", "agent-master-service"],
  ] as const) {
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role },
        subjects: [{ kind: "User", name: "switchyard-agent", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
  }
  await eventually(
    `the default ServiceAccount in ${ns}`,
    () => core.readNamespacedServiceAccount({ name: "default", namespace: ns }),
    { timeoutMs: 10_000 },
  );
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: "shop-0", labels: { app: "shop" } },
      spec: {
        containers: [
          {
            name: "app",
            image: "example.invalid/shop:1",
            envFrom: [{ configMapRef: { name: "app-config" } }, { prefix: "DB_", secretRef: { name: "db" } }],
            env: [
              { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              { name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: "db", key: "url" } } },
              { name: "GREETING", value: "level=$(LOG_LEVEL)" },
            ],
            volumeMounts: [{ name: "config", mountPath: "/etc/shop" }],
          },
        ],
        volumes: [{ name: "config", configMap: { name: "app-config" } }],
      },
    },
  });
  dir = mkdtempSync(join(tmpdir(), "agent-it-"));
  const secretsFile = join(dir, "secrets.json");
  writeFileSync(
    secretsFile,
    JSON.stringify({
      sessions: {
        "branchy-1": {
          secretSha256: sha256Hex(BRANCH_SECRET),
          branch: { variable: "DATABASE_URL", branch: "feature-42" },
        },
      },
    }),
  );
  const { createServer } = await import("node:net");
  metricsPort = await new Promise<number>((r) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => r(p));
    });
  });
  agent = await AgentProcess.start([
    "--kubeconfig",
    agentUser.kubeconfigPath,
    "--pod",
    `${ns}/shop-0`,
    "--container",
    "app",
    "--app-port",
    "18080:0",
    "--secret-hash",
    sha256Hex(SECRET),
    "--secrets-file",
    secretsFile,
    "--metrics-listen",
    `127.0.0.1:${metricsPort}`,
  ]);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await agent?.stop();
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("env through the protocol", () => {
  it("equals the pod's environment as the kubelet builds it", async () => {
    // Written out from the pod spec above, the way the kubelet builds it: service links
    // (the master service and the namespace's), then envFrom in order (every key without
    // "=" is a name since relaxed env var validation), then env with $(VAR) expanded.
    // The service cluster IPs are the only values the API chooses, so they are read back.
    const core = set.get("east").kubeConfig().makeApiClient(CoreV1Api);
    const clusterIp = async (namespace: string, name: string) =>
      (await core.readNamespacedService({ namespace, name })).spec!.clusterIP!;
    const master = await clusterIp("default", "kubernetes");
    const cart = await clusterIp(ns, "cart-api");
    expect(cart).toMatch(/^10\./);
    const c = await connect("env-1");
    const got = await c.env();
    expect(got.error).toBe("");
    expect(got.vars).toEqual({
      KUBERNETES_SERVICE_HOST: master,
      KUBERNETES_SERVICE_PORT: "443",
      KUBERNETES_SERVICE_PORT_HTTPS: "443",
      KUBERNETES_PORT: `tcp://${master}:443`,
      KUBERNETES_PORT_443_TCP: `tcp://${master}:443`,
      KUBERNETES_PORT_443_TCP_PROTO: "tcp",
      KUBERNETES_PORT_443_TCP_PORT: "443",
      KUBERNETES_PORT_443_TCP_ADDR: master,
      CART_API_SERVICE_HOST: cart,
      CART_API_SERVICE_PORT: "80",
      CART_API_SERVICE_PORT_HTTP: "80",
      CART_API_PORT: `tcp://${cart}:80`,
      CART_API_PORT_80_TCP: `tcp://${cart}:80`,
      CART_API_PORT_80_TCP_PROTO: "tcp",
      CART_API_PORT_80_TCP_PORT: "80",
      CART_API_PORT_80_TCP_ADDR: cart,
      LOG_LEVEL: "debug",
      "settings.yaml": "port: 8080\nname: shop\n",
      DB_url: "postgres://db:5432/shop?sslmode=disable",
      DB_password: "s3cret",
      POD_NAME: "shop-0",
      DATABASE_URL: "postgres://db:5432/shop?sslmode=disable",
      GREETING: "level=debug",
    });
  });

  it("applies include/exclude patterns and names", async () => {
    const c = await connect("env-2");
    expect(Object.keys((await c.env({ include: ["DB_*"], exclude: ["*password"] })).vars)).toEqual([
      "DB_url",
    ]);
    expect((await c.env({ names: ["POD_NAME", "NOPE"] })).vars).toEqual({ POD_NAME: "shop-0" });
  });

  it("rewrites the database URL to the session's branch (secrets file) or the one in EnvGet", async () => {
    const branchy = await connect("branchy-1", BRANCH_SECRET);
    expect((await branchy.env({ names: ["DATABASE_URL"] })).vars.DATABASE_URL).toBe(
      "postgres://db:5432/feature-42?sslmode=disable",
    );
    const plain = await connect("env-3");
    expect((await plain.env({ names: ["DATABASE_URL"] })).vars.DATABASE_URL).toBe(
      "postgres://db:5432/shop?sslmode=disable",
    );
    const asked = await plain.env({
      names: ["DATABASE_URL"],
      branchVariable: "DATABASE_URL",
      branch: "pr-7",
    });
    expect(asked.vars.DATABASE_URL).toBe("postgres://db:5432/pr-7?sslmode=disable");
    // The branch session's secret is valid only for its own session id.
    await expect(AgentClient.connect(agent.url("other"), BRANCH_SECRET)).rejects.toMatchObject({
      status: 401,
    });
  });
});

describe("files through the protocol", () => {
  it("reads a ConfigMap-mounted file back in pieces, lists and stats it", async () => {
    const c = await connect("files-1");
    expect((await c.readWholeFile("/etc/shop/settings.yaml", 5)).toString()).toBe("port: 8080\nname: shop\n");
    const dir = await c.readDir("/etc/shop");
    expect(dir.result.case === "entries" && dir.result.value.entries.map((e) => e.name)).toEqual([
      "LOG_LEVEL",
      "settings.yaml",
    ]);
    const st = await c.stat("/etc/shop/settings.yaml");
    expect(st.result.case === "stat" && Number(st.result.value.size)).toBe(22);
  });

  it("lists the container's mounts, longest first, with the agent's resolver config", async () => {
    const c = await connect("files-mounts");
    const core = set.get("east").kubeConfig().makeApiClient(CoreV1Api);
    const live = await core.readNamespacedPod({ name: "shop-0", namespace: ns });
    // Every volume of this pod is API-backed (the ConfigMap, and the ServiceAccount projection
    // when the API server adds one), so every mount is listed.
    const expected = (live.spec!.containers[0]!.volumeMounts ?? [])
      .map((m) => m.mountPath)
      .sort((a, b) => b.length - a.length);
    expect(expected).toContain("/etc/shop");
    const r = await c.mounts();
    expect(r.error).toBe("");
    expect(r.result.case === "mounts" && r.result.value.paths).toEqual(expected);
    const own = await readFile("/etc/resolv.conf", "utf8").catch(() => "");
    expect(r.result.case === "mounts" && r.result.value.resolvConf).toBe(own);
  });

  it("answers paths the API cannot serve with clear errors, never a wrong answer", async () => {
    const c = await connect("files-2");
    const image = await c.open("/etc/passwd");
    expect(image.error).toBe("ENOTSUP");
    expect(image.message).toMatch(
      /not under a volume mount of container app; files from the container image are not available/,
    );
    expect((await c.open("/etc/shop/missing")).error).toBe("ENOENT");
    expect((await c.open("/etc/shop/settings.yaml", true)).error).toBe("EROFS");
    expect((await c.read(999n, 0, 10)).error).toBe("EBADF");
  });
});

describe("the process", () => {
  it("serves metrics and never logs secrets", async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    const text = await res.text();
    expect(text).toMatch(/^switchyard_agent_sessions \d+$/m);
    expect(text).toMatch(/^switchyard_agent_errors_total\{code="auth_failed"\} [1-9]/m);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status).toBe(200);
    const logs = agent.output();
    expect(logs).toContain('"session":"env-1"');
    expect(logs).not.toContain(SECRET);
    expect(logs).not.toContain(BRANCH_SECRET);
  });
});
