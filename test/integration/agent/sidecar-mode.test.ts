// The sidecar's way to its target's env and files, with no API access: the member's template
// gives the agent container copies of the app's env and volume mounts; the environment the
// kubelet builds for that container (resolveContainerEnv: the kubelet's rules, against a real
// API server) becomes the real agent process's environment, started with the template's own
// flags, a kubeconfig that does not exist and the volumes laid out below its root as the
// kubelet writes them. Its env answer must equal the app's environment as the API path
// resolves it, and its files what the volumes hold.
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_CONTAINER, injectSidecar } from "../../../control-plane/src/member/sidecar-pod-template.js";
import { ApiSources } from "../../../data-plane/agent/src/target/api-sources.js";
import { resolveContainerEnv } from "../../../data-plane/agent/src/target/env-resolver.js";
import { SERVICE_LINK_NAME, TARGET_ROOT } from "../../../proto/sidecar-target.js";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { AgentClient } from "../../peers/agent-client.js";
import { eventually } from "../../support/poll.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import { AgentProcess } from "./agent-process.js";

const ns = "shop";
const SECRET = "sidecar-agent-secret-5d1e";
const CONFIG = { LOG_LEVEL: "debug", "settings.yaml": "port: 8080\nname: shop\n" };

let set: ClusterSet;
let pod: V1Pod;
let sources: ApiSources;
const running: { agent: AgentProcess; client: AgentClient }[] = [];

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"] });
  const kc = set.get("east").kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  sources = new ApiSources(kc);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  await core.createNamespacedConfigMap({
    namespace: ns,
    body: { metadata: { name: "app-config" }, data: CONFIG },
  });
  await core.createNamespacedSecret({
    namespace: ns,
    body: { metadata: { name: "db" }, stringData: { url: "postgres://db:5432/shop", password: "s3cret" } },
  });
  await core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: "cart-api" }, spec: { ports: [{ name: "http", port: 80 }] } },
  });
  await eventually(
    `the default ServiceAccount in ${ns}`,
    () => core.readNamespacedServiceAccount({ name: "default", namespace: ns }),
    { timeoutMs: 10_000 },
  );
  const template = injectSidecar(
    {
      metadata: { labels: { app: "shop" } },
      spec: {
        containers: [
          {
            name: "app",
            image: "example.invalid/shop:1",
            resources: { limits: { cpu: "1500m", memory: "256Mi" } },
            envFrom: [{ configMapRef: { name: "app-config" } }, { prefix: "DB_", secretRef: { name: "db" } }],
            env: [
              { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "db", key: "password" } } },
              {
                name: "CPU_MILLIS",
                valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } },
              },
              { name: "LOG_LEVEL", value: "info" },
              {
                name: "GREETING",
                value:
                  "level=$(LOG_LEVEL) cart=$(CART_API_SERVICE_HOST) db=$(DB_url) $$(LOG_LEVEL) $(MISSING)",
              },
              { name: "DATABASE_URL", value: "$(DB_url)" },
            ],
            volumeMounts: [
              { name: "config", mountPath: "/etc/shop" },
              { name: "data", mountPath: "/data" },
              { name: "token", mountPath: "/var/run/secrets/tokens" },
            ],
          },
        ],
        volumes: [
          { name: "config", configMap: { name: "app-config" } },
          { name: "data", emptyDir: {} },
          { name: "token", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } },
        ],
      },
    },
    "app",
    sha256Hex(SECRET),
    { agentImage: "example.invalid/agent:1" },
  );
  pod = await core.createNamespacedPod({
    namespace: ns,
    body: { metadata: { name: "shop-0", labels: template.metadata!.labels! }, spec: template.spec! },
  });
});

afterAll(async () => {
  for (const { agent, client } of running) {
    client.close();
    await agent.stop();
  }
  await set?.stop();
});

/** The agent's volumes as the kubelet lays them out: a ConfigMap behind `..data`, an emptyDir. */
function layOutVolumes(root: string): void {
  const cm = join(root, "etc/shop");
  const stamp = "..2026_01_02_03_04_05.000000001";
  mkdirSync(join(cm, stamp), { recursive: true });
  for (const [key, value] of Object.entries(CONFIG)) {
    writeFileSync(join(cm, stamp, key), value);
    chmodSync(join(cm, stamp, key), 0o644);
    symlinkSync(`..data/${key}`, join(cm, key));
  }
  symlinkSync(stamp, join(cm, "..data"));
  mkdirSync(join(root, "data/cache"), { recursive: true });
  writeFileSync(join(root, "data/cache/state.json"), "{}");
  chmodSync(join(root, "data/cache/state.json"), 0o600);
  symlinkSync("/etc/passwd", join(root, "data/passwd"));
}

/** The real agent process as the kubelet would start the template's agent container. */
async function startSidecar(root: string): Promise<AgentClient> {
  const agentContainer = pod.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
  const env = await resolveContainerEnv(pod, sources.envSources(), { container: AGENT_CONTAINER });
  // The test runner's own service links (a CI pod's) are not this pod's.
  const inherited = Object.keys(process.env).filter((k) => SERVICE_LINK_NAME.test(k));
  const agent = await AgentProcess.start(
    [
      ...agentContainer.args!.filter(
        (a) => (a.startsWith("--target-") && !a.startsWith("--target-root=")) || a.startsWith("--container="),
      ),
      `--target-root=${root}`, // where this test lays the volumes out
      "--secret-hash",
      sha256Hex(SECRET),
      // Neither is read: a sidecar with both target flags makes no API call.
      "--kubeconfig",
      join(root, "no-such-kubeconfig"),
      "--pod",
      `${ns}/shop-0`,
    ],
    { ...Object.fromEntries(inherited.map((k) => [k, undefined])), ...Object.fromEntries(env) },
  );
  const client = await AgentClient.connect(agent.url(`sidecar-${running.length}`), SECRET);
  running.push({ agent, client });
  return client;
}

describe("a sidecar agent with no API access", () => {
  it("was given the template's flags and the app's env under the prefix", () => {
    const args = pod.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!.args!;
    expect(args).toEqual(
      expect.arrayContaining([
        `--target-root=${TARGET_ROOT}`,
        "--target-mount=/etc/shop",
        "--target-mount=/data",
      ]),
    );
    expect(args).not.toContain("--target-mount=/var/run/secrets/tokens");
  });

  it("answers the app's environment exactly as the API path resolves it", async () => {
    const c = await startSidecar(testScratchDir("sy-sidecar-env-"));
    const expected = Object.fromEntries(
      await resolveContainerEnv(pod, sources.envSources(), { container: "app" }),
    );
    expect(expected).toMatchObject({
      LOG_LEVEL: "info",
      CPU_MILLIS: "1500",
      GREETING: expect.stringMatching(
        /^level=info cart=10\.[0-9.]+ db=postgres:\/\/db:5432\/shop \$\(LOG_LEVEL\) \$\(MISSING\)$/,
      ),
    });
    const got = await c.env();
    expect(got.error).toBe("");
    expect(got.vars).toEqual(expected);
    expect(Object.keys((await c.env({ include: ["DB_*"], exclude: ["*password"] })).vars)).toEqual([
      "DB_url",
    ]);
    const branch = await c.env({ names: ["DATABASE_URL"], branchVariable: "DATABASE_URL", branch: "pr-7" });
    expect(branch.vars.DATABASE_URL).toBe("postgres://db:5432/pr-7");
    // A database branch: the variable points at the CLI's forward, with the branch's credentials.
    const rewritten = await c.env({
      names: ["DATABASE_URL", "LOG_LEVEL"],
      branches: [
        {
          variable: "DATABASE_URL",
          database: "sy_pr_7_abcdefghijkl",
          user: "sy_pr_7_abcdefghijkl",
          password: "Br4nchPa55word",
          host: "127.0.0.1",
          port: 40123,
        },
      ],
    });
    expect(rewritten.error).toBe("");
    expect(rewritten.vars).toEqual({
      DATABASE_URL: "postgres://sy_pr_7_abcdefghijkl:Br4nchPa55word@127.0.0.1:40123/sy_pr_7_abcdefghijkl",
      LOG_LEVEL: "info",
    });
    // A variable the target lacks fails the whole request, naming it (never the password).
    const missing = await c.env({
      names: ["LOG_LEVEL"],
      branches: [
        {
          variable: "NO_SUCH_URL",
          database: "d",
          user: "u",
          password: "Secr3tPw",
          host: "127.0.0.1",
          port: 1,
        },
      ],
    });
    expect(missing.error).toContain("NO_SUCH_URL");
    expect(missing.error).not.toContain("Secr3tPw");
  });

  it("serves the files of the volumes it shares, and says why it serves no other", async () => {
    const root = testScratchDir("sy-sidecar-files-");
    layOutVolumes(root);
    const c = await startSidecar(root);
    expect((await c.readWholeFile("/etc/shop/settings.yaml", 5)).toString()).toBe(CONFIG["settings.yaml"]);
    const listing = await c.readDir("/etc/shop");
    expect(listing.result.case === "entries" && listing.result.value.entries.map((e) => e.name)).toEqual([
      "..2026_01_02_03_04_05.000000001",
      "..data",
      "LOG_LEVEL",
      "settings.yaml",
    ]);
    const st = await c.stat("/data/cache/state.json");
    expect(st.result.case === "stat" && st.result.value.mode).toBe(0o100600);
    expect((await c.open("/data/cache/missing")).error).toBe("ENOENT");
    for (const path of ["/etc/passwd", "/data/passwd", "/var/run/secrets/tokens/token"]) {
      const r = await c.open(path);
      expect(r.error, path).toBe("ENOTSUP");
      expect(r.message, path).toContain("files of the container's image are not served");
    }
    expect((await c.open("/data/cache/state.json", true)).error).toBe("EROFS");
  });
});
