// Read-only view of the files a container sees under its volume mounts, for the volume
// kinds whose content lives in the Kubernetes API: configMap, secret, downwardAPI and
// projected (configMap/secret/downwardAPI sources). In sidecar mode, volumes that the
// agent container shares with the target (emptyDir, PVCs, …) are read from the agent's
// own mount. Anything else answers "not available" — never a wrong or empty answer.
import { readdir, readFile, stat } from "node:fs/promises";
import { join, posix } from "node:path";
import type {
  V1Container,
  V1DownwardAPIVolumeFile,
  V1KeyToPath,
  V1Pod,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { parseQuantity } from "./env-resolver.js";

export type FileErrorCode =
  | typeof ErrorCode.FILE_NOT_FOUND
  | typeof ErrorCode.FILE_NOT_AVAILABLE
  | typeof ErrorCode.FILE_IS_DIRECTORY
  | typeof ErrorCode.FILE_NOT_DIRECTORY;

export class FileAccessError extends Error {
  constructor(
    readonly code: FileErrorCode,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

export interface FileStat {
  type: "file" | "directory";
  size: number;
  /** Permission bits, e.g. 0o644. */
  mode: number;
}

export interface DirEntry {
  name: string;
  type: "file" | "directory";
}

/** Raw bytes of the objects volumes refer to. */
export interface VolumeSources {
  configMap(namespace: string, name: string): Promise<Record<string, Buffer> | undefined>;
  secret(namespace: string, name: string): Promise<Record<string, Buffer> | undefined>;
}

export interface VolumeFilesOptions {
  /** Container whose mounts are served; default: the first container. */
  container?: string;
  /** Sidecar mode: volume name → where the agent itself has that volume mounted. */
  sharedVolumes?: ReadonlyMap<string, string>;
}

type Tree = Map<string, Tree | { data: Buffer; mode: number }>;
type Leaf = { data: Buffer; mode: number };
const isLeaf = (n: Tree | Leaf): n is Leaf => !(n instanceof Map);

function put(tree: Tree, path: string, leaf: Leaf): void {
  const parts = posix.normalize(path).split("/").filter(Boolean);
  let node = tree;
  for (const [i, part] of parts.entries()) {
    if (i === parts.length - 1) {
      node.set(part, leaf);
      return;
    }
    let next = node.get(part);
    if (!next || isLeaf(next)) {
      next = new Map();
      node.set(part, next);
    }
    node = next;
  }
}

function labelsFile(map: Record<string, string> | undefined): Buffer {
  // The kubelet writes sorted key="value" lines with the value quoted as Go's %q does.
  const lines = Object.keys(map ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(map![k])}`);
  return Buffer.from(lines.join("\n"));
}

function downwardValue(pod: V1Pod, containers: V1Container[], item: V1DownwardAPIVolumeFile): Buffer {
  if (item.fieldRef) {
    const f = item.fieldRef.fieldPath;
    if (f === "metadata.labels") return labelsFile(pod.metadata?.labels);
    if (f === "metadata.annotations") return labelsFile(pod.metadata?.annotations);
    const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(f);
    if (m)
      return Buffer.from(
        (m[1] === "labels" ? pod.metadata?.labels : pod.metadata?.annotations)?.[m[2]!] ?? "",
      );
    const simple: Record<string, string | undefined> = {
      "metadata.name": pod.metadata?.name,
      "metadata.namespace": pod.metadata?.namespace,
      "metadata.uid": pod.metadata?.uid,
    };
    if (f in simple) return Buffer.from(simple[f] ?? "");
    throw new FileAccessError(
      ErrorCode.FILE_NOT_AVAILABLE,
      item.path,
      `downwardAPI field ${f} is not served`,
    );
  }
  if (item.resourceFieldRef) {
    const ref = item.resourceFieldRef;
    const c = containers.find((x) => x.name === ref.containerName) ?? containers[0];
    const [kind, name] = ref.resource.split(".") as ["limits" | "requests", string];
    const raw = c?.resources?.[kind]?.[name];
    if (raw === undefined) {
      throw new FileAccessError(
        ErrorCode.FILE_NOT_AVAILABLE,
        item.path,
        `${ref.resource} is not set in the pod spec; the kubelet would write node allocatable, which is not known here`,
      );
    }
    const divisor = parseQuantity(String(ref.divisor ?? "1"));
    return Buffer.from(String(Math.ceil(parseQuantity(String(raw)) / divisor - 1e-9)));
  }
  throw new FileAccessError(ErrorCode.FILE_NOT_AVAILABLE, item.path, "unsupported downwardAPI item");
}

/** Serves the files under one pod container's API-backed volume mounts. */
export class VolumeFiles {
  private readonly container: V1Container;
  private readonly volumeMounts: V1VolumeMount[];
  private readonly trees = new Map<string, Promise<Tree>>();

  constructor(
    private readonly pod: V1Pod,
    private readonly sources: VolumeSources,
    private readonly options: VolumeFilesOptions = {},
  ) {
    const containers = pod.spec?.containers ?? [];
    const c = options.container ? containers.find((x) => x.name === options.container) : containers[0];
    if (!c) throw new Error(`pod ${pod.metadata?.name} has no container ${options.container ?? "(none)"}`);
    this.container = c;
    // Longest mount path first, so nested mounts win.
    this.volumeMounts = [...(c.volumeMounts ?? [])].sort((a, b) => b.mountPath.length - a.mountPath.length);
  }

  /** Forget cached volume contents (call when a referenced ConfigMap/Secret changes). */
  invalidate(): void {
    this.trees.clear();
  }

  /**
   * The mount paths of the volumes served: API-backed kinds (configMap, secret, downwardAPI,
   * projected) and volumes the agent shares; normalized, longest first.
   */
  mounts(): Promise<string[]> {
    const volumes = new Map((this.pod.spec?.volumes ?? []).map((v) => [v.name, v]));
    const served = this.volumeMounts.filter((m) => {
      if (this.options.sharedVolumes?.has(m.name)) return true;
      const v = volumes.get(m.name);
      return !!(v && (v.configMap || v.secret || v.downwardAPI || v.projected));
    });
    const paths = served.map((m) => posix.normalize(m.mountPath).replace(/(.)\/$/, "$1"));
    return Promise.resolve([...new Set(paths)].sort((a, b) => b.length - a.length));
  }

  private find(path: string): { mount: V1VolumeMount; rest: string } {
    const p = posix.normalize(path.startsWith("/") ? path : `/${path}`);
    for (const m of this.volumeMounts) {
      const mp = posix.normalize(m.mountPath).replace(/\/$/, "") || "/";
      if (p === mp || p.startsWith(mp === "/" ? "/" : `${mp}/`))
        return { mount: m, rest: p.slice(mp.length) };
    }
    throw new FileAccessError(
      ErrorCode.FILE_NOT_AVAILABLE,
      path,
      `${path} is not under a volume mount of container ${this.container.name}; files from the container image are not available remotely (mounts: ${this.volumeMounts.map((m) => m.mountPath).join(", ") || "none"})`,
    );
  }

  private volume(name: string): V1Volume {
    const v = (this.pod.spec?.volumes ?? []).find((x) => x.name === name);
    if (!v) throw new Error(`volume ${name} not found in pod spec`);
    return v;
  }

  private async keyedFiles(
    kind: "configMap" | "secret",
    name: string,
    items: V1KeyToPath[] | undefined,
    mode: number,
    optional: boolean | undefined,
    into: Tree,
  ): Promise<void> {
    const ns = this.pod.metadata?.namespace ?? "default";
    const data =
      kind === "configMap" ? await this.sources.configMap(ns, name) : await this.sources.secret(ns, name);
    if (!data) {
      if (optional) return;
      throw new FileAccessError(
        ErrorCode.FILE_NOT_AVAILABLE,
        name,
        `${kind === "configMap" ? "ConfigMap" : "Secret"} ${ns}/${name} does not exist, so the pod could not have mounted it`,
      );
    }
    if (items && items.length > 0) {
      for (const it of items) {
        const bytes = data[it.key];
        if (bytes === undefined) {
          if (optional) continue;
          throw new FileAccessError(
            ErrorCode.FILE_NOT_FOUND,
            it.path,
            `key ${it.key} not found in ${kind} ${ns}/${name}`,
          );
        }
        put(into, it.path, { data: bytes, mode: it.mode ?? mode });
      }
    } else {
      for (const [k, bytes] of Object.entries(data)) put(into, k, { data: bytes, mode });
    }
  }

  private async buildTree(v: V1Volume): Promise<Tree> {
    const tree: Tree = new Map();
    const containers = this.pod.spec?.containers ?? [];
    if (v.configMap) {
      await this.keyedFiles(
        "configMap",
        v.configMap.name!,
        v.configMap.items,
        v.configMap.defaultMode ?? 0o644,
        v.configMap.optional,
        tree,
      );
    } else if (v.secret) {
      await this.keyedFiles(
        "secret",
        v.secret.secretName!,
        v.secret.items,
        v.secret.defaultMode ?? 0o644,
        v.secret.optional,
        tree,
      );
    } else if (v.downwardAPI) {
      for (const it of v.downwardAPI.items ?? []) {
        put(tree, it.path, {
          data: downwardValue(this.pod, containers, it),
          mode: it.mode ?? v.downwardAPI.defaultMode ?? 0o644,
        });
      }
    } else if (v.projected) {
      const mode = v.projected.defaultMode ?? 0o644;
      for (const src of v.projected.sources ?? []) {
        if (src.configMap)
          await this.keyedFiles(
            "configMap",
            src.configMap.name!,
            src.configMap.items,
            mode,
            src.configMap.optional,
            tree,
          );
        else if (src.secret)
          await this.keyedFiles(
            "secret",
            src.secret.name!,
            src.secret.items,
            mode,
            src.secret.optional,
            tree,
          );
        else if (src.downwardAPI) {
          for (const it of src.downwardAPI.items ?? [])
            put(tree, it.path, { data: downwardValue(this.pod, containers, it), mode: it.mode ?? mode });
        }
        // serviceAccountToken and clusterTrustBundle sources are minted by the kubelet for
        // that pod only; they are left out rather than faked.
      }
    }
    return tree;
  }

  private async locate(path: string): Promise<{ node: Tree | Leaf } | { local: string }> {
    const { mount, rest } = this.find(path);
    const shared = this.options.sharedVolumes?.get(mount.name);
    const sub = mount.subPath ?? "";
    if (shared !== undefined) return { local: join(shared, sub, rest) };
    const v = this.volume(mount.name);
    if (!v.configMap && !v.secret && !v.downwardAPI && !v.projected) {
      throw new FileAccessError(
        ErrorCode.FILE_NOT_AVAILABLE,
        path,
        `${path} is on volume ${mount.name} (${Object.keys(v)
          .filter((k) => k !== "name")
          .join(
            ", ",
          )}), whose content is not in the API; it is available only when the agent runs as a sidecar sharing that volume`,
      );
    }
    let tree = this.trees.get(v.name);
    if (!tree) {
      tree = this.buildTree(v);
      this.trees.set(v.name, tree);
      tree.catch(() => this.trees.delete(v.name));
    }
    let node: Tree | Leaf = await tree;
    for (const part of [...sub.split("/"), ...rest.split("/")].filter(Boolean)) {
      if (isLeaf(node))
        throw new FileAccessError(ErrorCode.FILE_NOT_DIRECTORY, path, `${path}: a parent is a file`);
      const next: Tree | Leaf | undefined = node.get(part);
      if (!next)
        throw new FileAccessError(ErrorCode.FILE_NOT_FOUND, path, `${path}: no such file or directory`);
      node = next;
    }
    return { node };
  }

  async stat(path: string): Promise<FileStat> {
    const loc = await this.locate(path);
    if ("local" in loc) {
      const s = await stat(loc.local).catch(() => {
        throw new FileAccessError(ErrorCode.FILE_NOT_FOUND, path, `${path}: no such file or directory`);
      });
      return { type: s.isDirectory() ? "directory" : "file", size: s.size, mode: s.mode & 0o7777 };
    }
    const n = loc.node;
    return isLeaf(n)
      ? { type: "file", size: n.data.length, mode: n.mode }
      : { type: "directory", size: 0, mode: 0o755 };
  }

  async readDir(path: string): Promise<DirEntry[]> {
    const loc = await this.locate(path);
    if ("local" in loc) {
      const entries = await readdir(loc.local, { withFileTypes: true }).catch(() => {
        throw new FileAccessError(ErrorCode.FILE_NOT_FOUND, path, `${path}: no such directory`);
      });
      return entries.map((e) => ({ name: e.name, type: e.isDirectory() ? "directory" : "file" }));
    }
    if (isLeaf(loc.node)) throw new FileAccessError(ErrorCode.FILE_NOT_DIRECTORY, path, `${path} is a file`);
    return [...loc.node.entries()]
      .map(([name, n]): DirEntry => ({ name, type: isLeaf(n) ? "file" : "directory" }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)); // byte order: stable and locale-free
  }

  async readFile(path: string): Promise<Buffer> {
    const loc = await this.locate(path);
    if ("local" in loc) {
      return readFile(loc.local).catch((err: NodeJS.ErrnoException) => {
        throw new FileAccessError(
          err.code === "EISDIR" ? ErrorCode.FILE_IS_DIRECTORY : ErrorCode.FILE_NOT_FOUND,
          path,
          `${path}: ${err.code === "EISDIR" ? "is a directory" : "no such file"}`,
        );
      });
    }
    if (!isLeaf(loc.node))
      throw new FileAccessError(ErrorCode.FILE_IS_DIRECTORY, path, `${path} is a directory`);
    return loc.node.data;
  }
}
