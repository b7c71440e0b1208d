// Whether `exec --network=transparent` can run here, and when not, one line saying why and
// how to fix it. It needs Linux, unprivileged user namespaces (with network and mount
// namespaces inside), a usable /dev/net/tun, util-linux's unshare and mount, iproute2's ip,
// and tun2socks (SWITCHYARD_TUN2SOCKS, `tun2socks` on PATH, or the one `npm run binaries`
// builds in the cache).
import { spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync, readdirSync } from "node:fs";
import { findExecutable, isExecutable } from "../local/executables.js";
import { homedir } from "node:os";
import { join } from "node:path";

export const TUN2SOCKS_MODULE = "github.com/xjasonlyu/tun2socks/v2";

export type TransparentSupport = { ok: true; tun2socks: string } | { ok: false; reason: string };

const onPath = (name: string, env: NodeJS.ProcessEnv) =>
  name.includes("/") ? undefined : findExecutable(name, env);

/** SWITCHYARD_TUN2SOCKS, else `tun2socks` on PATH, else the newest tun2socks-v* in the binary cache. */
export function findTun2socks(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.SWITCHYARD_TUN2SOCKS)
    return isExecutable(env.SWITCHYARD_TUN2SOCKS) ? env.SWITCHYARD_TUN2SOCKS : undefined;
  const found = onPath("tun2socks", env);
  if (found) return found;
  const cache =
    env.SWITCHYARD_BIN_CACHE ?? join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "switchyard", "bin");
  try {
    const cached = readdirSync(cache)
      .filter((f) => /^tun2socks-v[\d.]+$/.test(f))
      .sort((a, b) => b.localeCompare(a, undefined, { numeric: true }));
    return cached.map((f) => join(cache, f)).find(isExecutable);
  } catch {
    return undefined;
  }
}

function sysctl(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** The fix for user namespaces that the kernel refuses, from the sysctls that refuse them. */
export function userNamespaceFix(read: (path: string) => string | undefined = sysctl): string {
  if (read("/proc/sys/kernel/unprivileged_userns_clone") === "0")
    return "sudo sysctl -w kernel.unprivileged_userns_clone=1";
  if (read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") === "1")
    return "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile allowing userns for unshare)";
  if (read("/proc/sys/user/max_user_namespaces") === "0")
    return "sudo sysctl -w user.max_user_namespaces=15000";
  return "allow unprivileged user namespaces on this machine";
}

let cached: TransparentSupport | undefined;

export function checkTransparentSupport(env: NodeJS.ProcessEnv = process.env): TransparentSupport {
  if (cached) return cached;
  cached = probe(env);
  return cached;
}

function probe(env: NodeJS.ProcessEnv): TransparentSupport {
  if (process.platform !== "linux")
    return { ok: false, reason: `${process.platform} has no user and network namespaces` };
  for (const tool of ["unshare", "mount", "ip"])
    if (!onPath(tool, env))
      return {
        ok: false,
        reason: `${tool} is not on PATH (install ${tool === "ip" ? "iproute2" : "util-linux"})`,
      };
  const tun2socks = findTun2socks(env);
  if (!tun2socks)
    return {
      ok: false,
      reason: `tun2socks is not installed: build ${TUN2SOCKS_MODULE} (npm run binaries in a checkout does) and put it on PATH or in SWITCHYARD_TUN2SOCKS`,
    };
  try {
    accessSync("/dev/net/tun", constants.R_OK | constants.W_OK);
  } catch (err) {
    return {
      ok: false,
      reason: `/dev/net/tun cannot be opened (${(err as NodeJS.ErrnoException).code}): sudo chmod 0666 /dev/net/tun, as most distributions ship it`,
    };
  }
  const r = spawnSync("unshare", ["--user", "--map-root-user", "--net", "--mount", "--", "true"], {
    encoding: "utf8",
    timeout: 5000,
  });
  if (r.status !== 0)
    return {
      ok: false,
      reason: `unprivileged user namespaces are off (${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}): ${userNamespaceFix()}`,
    };
  return { ok: true, tun2socks };
}
