// The target's files for the command's namespace: every file under the target container's
// volume mounts (ConfigMaps, Secrets, downward API, projected, …) and the paths asked for
// with `--files`, read once through the Default cluster when the command starts. Kubelet
// bookkeeping (`..data`, `..2024_…` under ConfigMap/Secret volumes) is left out: its
// entries are what the app's paths point at, and they are laid out as plain files.
import type { LayerFile } from "./bridge-protocol.js";

export interface TargetFileSource {
  mounts(): Promise<{ paths: string[]; resolvConf: string }>;
  stat(path: string): Promise<{ size: bigint | number; mode: number; isDir: boolean }>;
  readDir(path: string): Promise<Array<{ name: string; isDir: boolean }>>;
  readWholeFile(path: string): Promise<Buffer>;
}

export interface TargetFilesOptions {
  /** Paths of the container asked for besides its mounts (files or directories). */
  extraPaths?: readonly string[];
  /** Stop after this many bytes in all (default 64 MiB). */
  maxBytes?: number;
  /** Stop after this many files in all (default 10 000). */
  maxFiles?: number;
}

export interface TargetFiles {
  files: LayerFile[];
  mounts: string[];
  resolvConf: string;
  /** Paths that could not be read, with the agent's reason. */
  skipped: Array<{ path: string; reason: string }>;
}

const join = (dir: string, name: string) => (dir === "/" ? `/${name}` : `${dir}/${name}`);

export async function collectTargetFiles(
  src: TargetFileSource,
  o: TargetFilesOptions = {},
): Promise<TargetFiles> {
  const maxBytes = o.maxBytes ?? 64 * 1024 * 1024;
  const maxFiles = o.maxFiles ?? 10_000;
  let listed: { paths: string[]; resolvConf: string };
  const out: TargetFiles = { files: [], mounts: [], resolvConf: "", skipped: [] };
  try {
    listed = await src.mounts();
  } catch (err) {
    // An agent that cannot list mounts (an older one, or no target pod): no files, the laptop's DNS.
    out.skipped.push({ path: "the target's mounts", reason: (err as Error).message });
    return out;
  }
  const { paths, resolvConf } = listed;
  out.mounts = paths;
  out.resolvConf = resolvConf;
  const seen = new Set<string>();
  let bytes = 0;
  const walk = async (path: string, isDir?: boolean): Promise<void> => {
    if (seen.has(path)) return;
    seen.add(path);
    if (out.files.length >= maxFiles || bytes >= maxBytes) {
      out.skipped.push({ path, reason: `over the limit of ${maxFiles} files or ${maxBytes} bytes` });
      return;
    }
    try {
      const st = await src.stat(path);
      if (isDir ?? st.isDir) {
        for (const e of await src.readDir(path)) {
          if (e.name.startsWith("..")) continue; // the kubelet's atomic-writer bookkeeping
          await walk(join(path, e.name));
        }
        return;
      }
      const data = await src.readWholeFile(path);
      bytes += data.length;
      out.files.push({ path, mode: st.mode & 0o7777 || 0o644, data: data.toString("base64") });
    } catch (err) {
      out.skipped.push({ path, reason: (err as Error).message });
    }
  };
  for (const m of [...paths].reverse()) await walk(m);
  for (const p of o.extraPaths ?? []) await walk(p);
  return out;
}
