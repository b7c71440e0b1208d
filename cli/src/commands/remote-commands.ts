// `switchyard env` and `switchyard files cat|ls PATH`: one-shot questions to the Default
// cluster's agent through a short-lived session (created, asked, deleted). They create no
// database branches and split no queues (`branches` and `queues` in switchyard.json are for
// `exec`): `env` prints the target's variables as the target sees them.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Session } from "../sdk/kube/open-session.js";
import type { SessionConfig } from "../sdk/local/session-config.js";
import { openCommandSession } from "./command-session.js";
import { json, table, type Out, type OutputFormat } from "./output.js";

export interface RemoteCommandOptions {
  quiet?: boolean;
  readyTimeoutMs?: number;
}

async function withSession<T>(
  kc: KubeConfig,
  cfg: SessionConfig,
  out: Out,
  o: RemoteCommandOptions,
  fn: (s: Session) => Promise<T>,
): Promise<T> {
  // A one-shot question makes no database branch and splits no queue (that would patch the
  // deployed consumers): the answer is the target's own view.
  const s = await openCommandSession(kc, { ...cfg, branches: [], queues: [] }, out, {
    ...o,
    client: { pingIntervalMs: 0 },
  });
  try {
    return await fn(s);
  } finally {
    await s.close("done").catch(() => {});
  }
}

/** `KEY=value` lines (shell-quoted values would hide what the app really sees). */
export function formatEnv(vars: Record<string, string>): string {
  return Object.keys(vars)
    .sort()
    .map((k) => `${k}=${vars[k]}\n`)
    .join("");
}

export async function envCommand(
  kc: KubeConfig,
  cfg: SessionConfig,
  format: OutputFormat,
  out: Out,
  o: RemoteCommandOptions = {},
): Promise<number> {
  const vars = await withSession(kc, cfg, out, o, (s) =>
    s.client.env({ include: cfg.envInclude, exclude: cfg.envExclude }),
  );
  out.stdout(format === "json" ? json({ env: vars }) : formatEnv(vars));
  return 0;
}

export async function filesCatCommand(
  kc: KubeConfig,
  cfg: SessionConfig,
  path: string,
  format: OutputFormat,
  out: Out,
  o: RemoteCommandOptions = {},
): Promise<number> {
  const data = await withSession(kc, cfg, out, o, (s) => s.client.readWholeFile(path));
  if (format === "json") out.stdout(json({ path, size: data.length, base64: data.toString("base64") }));
  else if (out.stdoutBytes) out.stdoutBytes(data);
  else out.stdout(data.toString("utf8"));
  return 0;
}

export async function filesLsCommand(
  kc: KubeConfig,
  cfg: SessionConfig,
  path: string,
  format: OutputFormat,
  out: Out,
  o: RemoteCommandOptions = {},
): Promise<number> {
  const entries = await withSession(kc, cfg, out, o, async (s) => {
    const st = await s.client.stat(path);
    if (!st.isDir) return [{ name: path, isDir: false, size: st.size, mode: st.mode }];
    const list = await s.client.readDir(path);
    const out: Array<{ name: string; isDir: boolean; size?: number; mode?: number }> = [];
    for (const e of list) {
      const child = `${path.replace(/\/+$/, "")}/${e.name}`;
      const info = await s.client.stat(child).catch(() => undefined);
      out.push({ name: e.name, isDir: e.isDir, ...(info ? { size: info.size, mode: info.mode } : {}) });
    }
    return out;
  });
  if (format === "json") out.stdout(json({ path, entries }));
  else
    out.stdout(
      table(
        ["MODE", "SIZE", "NAME"],
        entries.map((e) => [
          e.mode !== undefined
            ? `${e.isDir ? "d" : "-"}${(e.mode & 0o777).toString(8).padStart(3, "0")}`
            : e.isDir
              ? "d"
              : "-",
          e.size !== undefined && !e.isDir ? String(e.size) : "-",
          e.isDir ? `${e.name}/` : e.name,
        ]),
      ),
    );
  return 0;
}
