import { describe, expect, it } from "vitest";
import { namespaceResolvConf, parseResolvConf } from "./resolv-conf.js";

const POD = `search default.svc.cluster.local svc.cluster.local cluster.local
nameserver 10.96.0.10
nameserver 10.96.0.11 # second
options ndots:5 timeout:2
; a comment
`;

describe("resolv.conf", () => {
  it("reads the pod's nameservers, search domains and options", () => {
    expect(parseResolvConf(POD)).toEqual({
      nameservers: ["10.96.0.10", "10.96.0.11"],
      search: ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"],
      options: ["ndots:5", "timeout:2"],
    });
    expect(parseResolvConf("domain corp.example\nsearch a b\n").search).toEqual(["a", "b"]);
    expect(parseResolvConf("").nameservers).toEqual([]);
  });

  it("writes the namespace's: the resolver as the only nameserver, the pod's search and options", () => {
    const text = namespaceResolvConf(parseResolvConf(POD));
    const lines = text
      .trim()
      .split("\n")
      .filter((l) => !l.startsWith("#"));
    expect(lines).toEqual([
      "nameserver 127.0.0.1",
      "search default.svc.cluster.local svc.cluster.local cluster.local",
      "options ndots:5 timeout:2",
    ]);
  });
});
