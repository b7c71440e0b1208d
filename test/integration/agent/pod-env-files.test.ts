// The agent's view of a target through the real API: env resolved as the kubelet would,
// and files under ConfigMap/Secret/projected/downwardAPI mounts — with clear errors for
// everything the API cannot answer.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { ApiSources } from "../../../data-plane/agent/src/target/api-sources.js";
import { resolveContainerEnv } from "../../../data-plane/agent/src/target/env-resolver.js";
import { VolumeFiles } from "../../../data-plane/agent/src/target/volume-files.js";
import { eventually } from "../../support/poll.js";

let set: ClusterSet;
let pod: V1Pod;
let sources: ApiSources;
const ns = "shop";

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"] });
  const kc = set.get("east").kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  sources = new ApiSources(kc);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  await core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: { name: "app-config" },
      data: { LOG_LEVEL: "debug", "feature.flags": "a,b", "settings.yaml": "port: 8080\n" },
      binaryData: { "logo.bin": Buffer.from([0, 1, 2, 255]).toString("base64") },
    },
  });
  await core.createNamespacedSecret({
    namespace: ns,
    body: { metadata: { name: "db" }, stringData: { password: "s3cret", url: "postgres://db:5432/shop" } },
  });
  await core.createNamespacedService({
    namespace: ns,
    body: {
      metadata: { name: "cart-api" },
      spec: {
        ports: [
          { name: "http", port: 80, targetPort: 8080 },
          { name: "grpc-x", port: 9000, protocol: "TCP" },
        ],
      },
    },
  });
  await core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: "headless" }, spec: { clusterIP: "None", ports: [{ port: 1 }] } },
  });
  // Pods need the namespace's default ServiceAccount (made by the controller manager).
  await eventually(
    `the default ServiceAccount in ${ns}`,
    () => core.readNamespacedServiceAccount({ name: "default", namespace: ns }),
    { timeoutMs: 10_000 },
  );
  pod = await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: "shop-0", labels: { app: "shop", tier: "web" }, annotations: { note: 'say "hi"' } },
      spec: {
        containers: [
          {
            name: "app",
            image: "example.invalid/shop:1",
            resources: { limits: { cpu: "1500m", memory: "256Mi" } },
            envFrom: [{ configMapRef: { name: "app-config" } }, { prefix: "DB_", secretRef: { name: "db" } }],
            env: [
              { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              { name: "TIER", valueFrom: { fieldRef: { fieldPath: "metadata.labels['tier']" } } },
              { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "db", key: "password" } } },
              {
                name: "OPTIONAL_MISSING",
                valueFrom: { secretKeyRef: { name: "nope", key: "x", optional: true } },
              },
              {
                name: "CPU_MILLIS",
                valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } },
              },
              {
                name: "MEM_MI",
                valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } },
              },
              { name: "LOG_LEVEL", value: "info" },
              { name: "GREETING", value: "level=$(LOG_LEVEL) cart=$(CART_API_SERVICE_HOST) $$(LOG_LEVEL)" },
            ],
            volumeMounts: [
              { name: "config", mountPath: "/etc/shop" },
              { name: "creds", mountPath: "/var/run/creds", readOnly: true },
              { name: "combined", mountPath: "/etc/combined" },
              { name: "info", mountPath: "/etc/podinfo" },
              { name: "scratch", mountPath: "/tmp/scratch" },
              { name: "config", mountPath: "/app/settings.yaml", subPath: "settings.yaml" },
            ],
          },
        ],
        volumes: [
          { name: "config", configMap: { name: "app-config" } },
          {
            name: "creds",
            secret: { secretName: "db", items: [{ key: "password", path: "db/password", mode: 0o400 }] },
          },
          {
            name: "combined",
            projected: {
              sources: [
                { configMap: { name: "app-config", items: [{ key: "LOG_LEVEL", path: "level" }] } },
                { secret: { name: "db", items: [{ key: "url", path: "db-url" }] } },
                { downwardAPI: { items: [{ path: "name", fieldRef: { fieldPath: "metadata.name" } }] } },
              ],
            },
          },
          {
            name: "info",
            downwardAPI: {
              items: [
                { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
                {
                  path: "cpu",
                  resourceFieldRef: { containerName: "app", resource: "limits.cpu", divisor: "1m" },
                },
              ],
            },
          },
          { name: "scratch", emptyDir: {} },
        ],
      },
    },
  });
});

afterAll(async () => {
  await set?.stop();
});

describe("env", () => {
  it("resolves the container environment as the kubelet would", async () => {
    const env = await resolveContainerEnv(pod, sources.envSources());
    const svc = await set
      .get("east")
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .readNamespacedService({ name: "cart-api", namespace: ns });
    const ip = svc.spec!.clusterIP!;
    expect(env.get("LOG_LEVEL")).toBe("info"); // env wins over envFrom
    expect(env.get("feature.flags")).toBe("a,b"); // relaxed names from envFrom are kept
    expect(env.get("DB_password")).toBe("s3cret"); // prefix
    expect(env.get("DB_url")).toBe("postgres://db:5432/shop");
    expect(env.get("POD_NAME")).toBe("shop-0");
    expect(env.get("TIER")).toBe("web");
    expect(env.get("PASSWORD")).toBe("s3cret");
    expect(env.has("OPTIONAL_MISSING")).toBe(false);
    expect(env.get("CPU_MILLIS")).toBe("1500");
    expect(env.get("MEM_MI")).toBe("256");
    expect(env.get("GREETING")).toBe(`level=info cart=${ip} $(LOG_LEVEL)`);
    // Service links: named ports, Docker-style link variables, and the master service.
    expect(env.get("CART_API_SERVICE_HOST")).toBe(ip);
    expect(env.get("CART_API_SERVICE_PORT")).toBe("80");
    expect(env.get("CART_API_SERVICE_PORT_HTTP")).toBe("80");
    expect(env.get("CART_API_SERVICE_PORT_GRPC_X")).toBe("9000");
    expect(env.get("CART_API_PORT")).toBe(`tcp://${ip}:80`);
    expect(env.get("CART_API_PORT_9000_TCP_ADDR")).toBe(ip);
    expect(env.get("KUBERNETES_SERVICE_HOST")).toMatch(/^10\.0\.0\.\d+$/);
    expect([...env.keys()].some((k) => k.startsWith("HEADLESS_"))).toBe(false);
  });

  it("keeps the master service but no others when service links are disabled", async () => {
    const env = await resolveContainerEnv(
      { ...pod, spec: { ...pod.spec!, enableServiceLinks: false } },
      sources.envSources(),
    );
    expect(env.has("CART_API_SERVICE_HOST")).toBe(false);
    expect(env.has("KUBERNETES_SERVICE_HOST")).toBe(true);
  });
});

describe("files", () => {
  const files = () => new VolumeFiles(pod, sources);

  it("reads ConfigMap, Secret, projected and downwardAPI files", async () => {
    const f = files();
    expect((await f.readFile("/etc/shop/settings.yaml")).toString()).toBe("port: 8080\n");
    expect([...(await f.readFile("/etc/shop/logo.bin"))]).toEqual([0, 1, 2, 255]);
    expect((await f.readFile("/var/run/creds/db/password")).toString()).toBe("s3cret");
    expect(await f.stat("/var/run/creds/db/password")).toEqual({ type: "file", size: 6, mode: 0o400 });
    expect((await f.readFile("/etc/combined/level")).toString()).toBe("debug");
    expect((await f.readFile("/etc/combined/db-url")).toString()).toBe("postgres://db:5432/shop");
    expect((await f.readFile("/etc/combined/name")).toString()).toBe("shop-0");
    expect((await f.readFile("/etc/podinfo/labels")).toString()).toBe('app="shop"\ntier="web"');
    expect((await f.readFile("/etc/podinfo/annotations")).toString()).toBe('note="say \\"hi\\""');
    expect((await f.readFile("/etc/podinfo/cpu")).toString()).toBe("1500");
    expect((await f.readFile("/app/settings.yaml")).toString()).toBe("port: 8080\n"); // subPath
  });

  it("lists directories", async () => {
    const f = files();
    expect(await f.readDir("/etc/shop")).toEqual([
      { name: "LOG_LEVEL", type: "file" },
      { name: "feature.flags", type: "file" },
      { name: "logo.bin", type: "file" },
      { name: "settings.yaml", type: "file" },
    ]);
    expect(await f.readDir("/var/run/creds")).toEqual([{ name: "db", type: "directory" }]);
    expect((await f.stat("/var/run/creds/db")).type).toBe("directory");
  });

  it("answers not-found and not-available clearly instead of guessing", async () => {
    const f = files();
    await expect(f.readFile("/etc/shop/missing")).rejects.toMatchObject({
      code: "SWITCHYARD_FILE_NOT_FOUND",
    });
    await expect(f.readFile("/etc/passwd")).rejects.toMatchObject({
      code: "SWITCHYARD_FILE_NOT_AVAILABLE",
      message: expect.stringContaining("not under a volume mount"),
    });
    await expect(f.readFile("/tmp/scratch/x")).rejects.toMatchObject({
      code: "SWITCHYARD_FILE_NOT_AVAILABLE",
      message: expect.stringContaining("emptyDir"),
    });
    await expect(f.readFile("/etc/shop")).rejects.toMatchObject({ code: "SWITCHYARD_FILE_IS_DIRECTORY" });
  });

  it("reflects a changed ConfigMap after invalidate()", async () => {
    const f = files();
    expect((await f.readFile("/etc/shop/LOG_LEVEL")).toString()).toBe("debug");
    const core = set.get("east").kubeConfig().makeApiClient(CoreV1Api);
    const cm = await core.readNamespacedConfigMap({ name: "app-config", namespace: ns });
    cm.data!.LOG_LEVEL = "warn";
    await core.replaceNamespacedConfigMap({ name: "app-config", namespace: ns, body: cm });
    expect((await f.readFile("/etc/shop/LOG_LEVEL")).toString()).toBe("debug"); // cached
    f.invalidate();
    expect((await f.readFile("/etc/shop/LOG_LEVEL")).toString()).toBe("warn");
  });
});
