import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig, type KubernetesListObject, type KubernetesObject } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { ResourceInformer, withoutManagedFields } from "./resource-informer.js";

const managedFields = [
  { manager: "kubectl", operation: "Update", fieldsType: "FieldsV1", fieldsV1: { "f:metadata": {} } },
];

function thing(name: string, resourceVersion: string): KubernetesObject {
  return {
    apiVersion: "v1",
    kind: "Thing",
    metadata: { namespace: "ns", name, resourceVersion, labels: { a: "b" }, managedFields },
  };
}

let server: Server | undefined;
let watchResponse: ServerResponse | undefined;
afterEach(async () => {
  watchResponse?.end();
  watchResponse = undefined;
  const s = server;
  server = undefined;
  if (!s) return;
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

/** An API server stand-in on loopback whose watch stays open and sends what the test writes. */
async function apiServer(): Promise<{ kc: KubeConfig; watchOpened: Promise<ServerResponse> }> {
  let opened!: (res: ServerResponse) => void;
  const watchOpened = new Promise<ServerResponse>((r) => (opened = r));
  server = createServer((req, res) => {
    if (!req.url?.includes("watch=true")) return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
    watchResponse = res;
    opened(res);
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: "c",
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: "u" }],
    contexts: [{ name: "c", cluster: "c", user: "u" }],
    currentContext: "c",
  });
  return { kc, watchOpened };
}

describe("ResourceInformer", () => {
  it("caches and delivers listed and watched objects without managedFields", async () => {
    const { kc, watchOpened } = await apiServer();
    const informer = new ResourceInformer<KubernetesObject>({
      kubeConfig: kc,
      what: "things",
      path: "/api/v1/things",
      list: async () =>
        ({
          apiVersion: "v1",
          kind: "ThingList",
          metadata: { resourceVersion: "1" },
          items: [thing("listed", "1")],
        }) as KubernetesListObject<KubernetesObject>,
    });
    const delivered: KubernetesObject[] = [];
    informer.subscribe((_e, o) => delivered.push(o));
    const stop = new AbortController();
    const running = informer.start(stop.signal);
    await informer.waitForSync();
    const watch = await watchOpened;
    watch.write(`${JSON.stringify({ type: "ADDED", object: thing("watched", "2") })}\n`);
    for (let i = 0; i < 200 && !informer.get("watched", "ns"); i++)
      await new Promise((r) => setTimeout(r, 10));

    for (const name of ["listed", "watched"]) {
      const cached = informer.get(name, "ns");
      expect(cached?.metadata?.labels).toEqual({ a: "b" });
      expect(cached?.metadata?.managedFields).toBeUndefined();
    }
    expect(delivered.map((o) => [o.metadata?.name, o.metadata?.managedFields])).toEqual([
      ["listed", undefined],
      ["watched", undefined],
    ]);
    stop.abort();
    await running;
  });

  it("withoutManagedFields keeps every other field and tolerates objects without metadata", () => {
    const o = thing("x", "5");
    expect(withoutManagedFields(o)).toBe(o);
    expect(JSON.parse(JSON.stringify(o))).toEqual({
      apiVersion: "v1",
      kind: "Thing",
      metadata: { namespace: "ns", name: "x", resourceVersion: "5", labels: { a: "b" } },
    });
    expect(withoutManagedFields({} as KubernetesObject)).toEqual({});
  });
});
