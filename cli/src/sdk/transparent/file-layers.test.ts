import { describe, expect, it } from "vitest";
import { anchorOf, groupByAnchor } from "./file-layers.js";

const existing = new Set(["/etc", "/var", "/var/run", "/var/run/secrets", "/opt", "/opt/app"]);
const dirExists = (p: string) => existing.has(p);
const file = (path: string) => ({ path, mode: 0o644, data: "" });

describe("file layers", () => {
  it("anchors a file at the deepest directory of this machine above it", () => {
    expect(anchorOf("/etc/demo/settings.yaml", dirExists)).toBe("/etc");
    expect(anchorOf("/etc/hosts", dirExists)).toBe("/etc");
    expect(anchorOf("/var/run/secrets/kubernetes.io/serviceaccount/token", dirExists)).toBe(
      "/var/run/secrets",
    );
    expect(anchorOf("/data/x", dirExists)).toBe("/");
  });

  it("lays files of one anchor, or of anchors inside it, in one overlay", () => {
    const groups = groupByAnchor(
      [
        file("/etc/demo/a"),
        file("/etc/resolv.conf"),
        file("/opt/app/conf/x"),
        file("/opt/b"),
        file("/data/y"),
      ],
      dirExists,
    );
    expect([...groups.entries()].map(([a, fs]) => [a, fs.map((f) => f.path)])).toEqual([
      ["/etc", ["/etc/demo/a", "/etc/resolv.conf"]],
      ["/opt", ["/opt/app/conf/x", "/opt/b"]],
      ["/", ["/data/y"]],
    ]);
  });
});
