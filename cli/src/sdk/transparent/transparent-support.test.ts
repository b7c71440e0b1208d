import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findTun2socks, userNamespaceFix } from "./transparent-support.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function exe(dir: string, name: string): string {
  const p = join(dir, name);
  writeFileSync(p, "#!/bin/sh\n");
  chmodSync(p, 0o755);
  return p;
}

describe("transparent support", () => {
  it("names the sysctl that refuses user namespaces", () => {
    const with_ = (values: Record<string, string>) => (p: string) => values[p];
    expect(userNamespaceFix(with_({ "/proc/sys/kernel/unprivileged_userns_clone": "0" }))).toBe(
      "sudo sysctl -w kernel.unprivileged_userns_clone=1",
    );
    expect(
      userNamespaceFix(with_({ "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1" })),
    ).toMatch(/kernel.apparmor_restrict_unprivileged_userns=0/);
    expect(userNamespaceFix(with_({ "/proc/sys/user/max_user_namespaces": "0" }))).toBe(
      "sudo sysctl -w user.max_user_namespaces=15000",
    );
    expect(userNamespaceFix(with_({}))).toMatch(/allow unprivileged user namespaces/);
  });

  it("finds tun2socks: SWITCHYARD_TUN2SOCKS, else PATH, else the newest in the binary cache", () => {
    const dir = mkdtempSync(join(tmpdir(), "t2s-"));
    dirs.push(dir);
    const bin = join(dir, "bin");
    const cache = join(dir, "cache");
    mkdirSync(bin);
    mkdirSync(cache);
    exe(cache, "tun2socks-v2.5.2");
    const newer = exe(cache, "tun2socks-v2.10.0");
    expect(findTun2socks({ PATH: "", SWITCHYARD_BIN_CACHE: cache })).toBe(newer);
    const onPath = exe(bin, "tun2socks");
    expect(findTun2socks({ PATH: bin, SWITCHYARD_BIN_CACHE: cache })).toBe(onPath);
    const explicit = exe(dir, "my-t2s");
    expect(findTun2socks({ PATH: bin, SWITCHYARD_TUN2SOCKS: explicit })).toBe(explicit);
    expect(findTun2socks({ PATH: bin, SWITCHYARD_TUN2SOCKS: join(dir, "missing") })).toBeUndefined();
    expect(findTun2socks({ PATH: "", SWITCHYARD_BIN_CACHE: join(dir, "none") })).toBeUndefined();
  });
});
