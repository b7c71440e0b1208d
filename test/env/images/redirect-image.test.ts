import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alternativeLinks, parseAlternative, parseDependsField } from "./debian-packages.js";
import { baseImage, parseDockerfileWithArgs } from "./dockerfile.js";
import { REPO_ROOT } from "./product-build.js";
import { checkDebianBase, hostDebianRelease, planRuns } from "./redirect-image.js";

const IPTABLES_ALTERNATIVE = [
  "auto",
  "/usr/sbin/iptables",
  "iptables-restore",
  "/usr/sbin/iptables-restore",
  "iptables-save",
  "/usr/sbin/iptables-save",
  "",
  "/usr/sbin/iptables-legacy",
  "10",
  "/usr/sbin/iptables-legacy-restore",
  "/usr/sbin/iptables-legacy-save",
  "/usr/sbin/iptables-nft",
  "20",
  "/usr/sbin/iptables-nft-restore",
  "",
  "",
].join("\n");

describe("Dockerfile.redirect's instructions", () => {
  it("are read as the packages to install and the alternative to set", () => {
    const file = parseDockerfileWithArgs(readFileSync(join(REPO_ROOT, "Dockerfile.redirect"), "utf8"));
    expect(file.stages).toHaveLength(1);
    const plan = planRuns(file.stages[0]!.runs, "Dockerfile.redirect");
    expect(plan.install).toEqual(["iptables"]);
    expect(plan.alternatives.get("iptables")).toBe("/usr/sbin/iptables-nft");
    expect(plan.alternatives.get("ip6tables")).toBe("/usr/sbin/ip6tables-nft");
    expect(baseImage(file, file.stages[0]!).image).toBe("debian:bookworm-slim");
  });

  it("refuses a command it cannot apply, with its text", () => {
    expect(() => planRuns(["apt-get update && curl -o /x https://example.com/x"], "F")).toThrow(
      /F: RUN curl -o \/x https:\/\/example.com\/x: the test images apply/,
    );
    expect(() => planRuns(["apt-get install -y iptables"], "F")).toThrow(/RUN apt-get install -y iptables/);
    expect(() => planRuns(["apt-get install -y --no-install-recommends a; rm -rf /"], "F")).toThrow(/RUN/);
    expect(() => planRuns(["update-alternatives --auto iptables"], "F")).toThrow(
      /update-alternatives --auto/,
    );
  });
});

describe("the base image", () => {
  const osRelease = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n';

  it("is this host's Debian release", () => {
    expect(hostDebianRelease(osRelease)).toBe("bookworm");
    expect(hostDebianRelease("ID=ubuntu\nVERSION_CODENAME=noble\n")).toBeUndefined();
    expect(() => checkDebianBase("debian:bookworm-slim", 13, "F", "bookworm")).not.toThrow();
    expect(() =>
      checkDebianBase(`debian:bookworm-slim@sha256:${"a".repeat(64)}`, 13, "F", "bookworm"),
    ).not.toThrow();
  });

  it("of another release or distribution is refused, naming the line", () => {
    expect(() => checkDebianBase("debian:trixie-slim", 13, "F", "bookworm")).toThrow(
      /F:13: the image is debian:trixie-slim, but this host is Debian bookworm/,
    );
    expect(() => checkDebianBase("debian:bookworm-slim", 13, "F", undefined)).toThrow(
      /this host is not Debian/,
    );
    expect(() => checkDebianBase("alpine:3.20", 2, "F", "bookworm")).toThrow(/F:2: .*only from debian/);
  });
});

describe("the package database", () => {
  it("reads dependency fields as alternatives groups of bare names", () => {
    expect(parseDependsField("libc6 (>= 2.34), libmnl0 (>= 1.0.3-4~), a | b:any (>= 1)")).toEqual([
      ["libc6"],
      ["libmnl0"],
      ["a", "b"],
    ]);
    expect(parseDependsField("")).toEqual([]);
  });

  it("reads an alternative with its slaves, a choice without one of them included", () => {
    const alt = parseAlternative("iptables", IPTABLES_ALTERNATIVE);
    expect(alt.mode).toBe("auto");
    expect(alt.link).toBe("/usr/sbin/iptables");
    expect(alt.slaves.map((s) => s.name)).toEqual(["iptables-restore", "iptables-save"]);
    expect(alt.choices).toEqual([
      {
        path: "/usr/sbin/iptables-legacy",
        priority: 10,
        slavePaths: ["/usr/sbin/iptables-legacy-restore", "/usr/sbin/iptables-legacy-save"],
      },
      { path: "/usr/sbin/iptables-nft", priority: 20, slavePaths: ["/usr/sbin/iptables-nft-restore", ""] },
    ]);
    expect(() => parseAlternative("x", "sometimes\n/x\n\n")).toThrow(/alternative x: unknown mode/);
  });

  it("links an alternative's highest choice present, or the one set by hand", () => {
    const alt = parseAlternative("iptables", IPTABLES_ALTERNATIVE);
    const present = new Set([
      "/usr/sbin/iptables-legacy",
      "/usr/sbin/iptables-legacy-restore",
      "/usr/sbin/iptables-nft",
      "/usr/sbin/iptables-nft-restore",
    ]);
    const auto = alternativeLinks([alt], present, new Map(), []);
    expect(auto).toContainEqual({ path: "/usr/sbin/iptables", symlink: "/etc/alternatives/iptables" });
    expect(auto).toContainEqual({ path: "/etc/alternatives/iptables", symlink: "/usr/sbin/iptables-nft" });
    expect(auto).toContainEqual({
      path: "/etc/alternatives/iptables-restore",
      symlink: "/usr/sbin/iptables-nft-restore",
    });
    // No save for nft in this registry, and the legacy one is not chosen: no link.
    expect(auto.some((f) => f.path.endsWith("iptables-save"))).toBe(false);

    const legacy = alternativeLinks([alt], present, new Map([["iptables", "/usr/sbin/iptables-legacy"]]), []);
    expect(legacy).toContainEqual({
      path: "/etc/alternatives/iptables",
      symlink: "/usr/sbin/iptables-legacy",
    });
    // The legacy save's file is not in the image: no link to it, as update-alternatives skips it.
    expect(legacy.some((f) => f.path.endsWith("iptables-save"))).toBe(false);

    expect(() => alternativeLinks([alt], present, new Map([["iptables", "/usr/sbin/nope"]]), [])).toThrow(
      /update-alternatives --set iptables \/usr\/sbin\/nope: not a choice of iptables/,
    );
    expect(() => alternativeLinks([alt], present, new Map([["nft", "/x"]]), [])).toThrow(
      /no alternative nft/,
    );
    expect(alternativeLinks([alt], new Set(), new Map(), [])).toEqual([]);
  });
});
