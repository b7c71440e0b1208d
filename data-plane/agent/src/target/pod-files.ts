// The target's files as a sidecar agent sees them, with no API access: the sidecar template
// mounts every volume the target container mounts into the agent too, read-only, at
// `<root><mountPath>` (proto/sidecar-target.ts), so a path under one of those mounts is read
// from the agent's copy, with the real modes, sizes and contents the app sees. Any other
// path is the container image's, which the agent does not have: it answers
// FILE_NOT_AVAILABLE with that reason. Symlinks are followed (ConfigMap and Secret volumes
// are `..data` symlinks) but the result must stay inside a mount's copy.
import { constants } from "node:fs";
import { open, readdir, readlink, realpath, stat } from "node:fs/promises";
import { isAbsolute, posix } from "node:path";
import { integerIn, OptionError } from "../../../../lib/option-error.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import type { TargetFiles } from "./target-view.js";
import { FileAccessError, type DirEntry, type FileStat } from "./volume-files.js";

export interface PodFilesOptions {
  /** Largest file an open reads, bytes; larger ones answer FILE_NOT_AVAILABLE (default 16 MiB). */
  maxFileBytes?: number;
}

const NOT_SERVED = "not in a volume the agent shares: files of the container's image are not served";

const under = (path: string, dir: string) => path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`);

export class PodFiles implements TargetFiles {
  /** The target's mount paths, normalized, longest first (a nested mount wins). */
  private readonly mountPaths: string[];
  private readonly maxFileBytes: number;

  /**
   * @param root where the agent mounts the target's volumes (`--target-root`).
   * @param mounts the target's mount paths (`--target-mount`), each mounted at root + path.
   */
  constructor(
    private readonly root: string,
    mounts: readonly string[],
    options: PodFilesOptions = {},
  ) {
    if (!isAbsolute(root))
      throw new OptionError("--target-root", `must be an absolute path, got ${JSON.stringify(root)}`);
    for (const m of mounts)
      if (!posix.isAbsolute(m))
        throw new OptionError(
          "--target-mount",
          `must be the target's absolute mount path, got ${JSON.stringify(m)}`,
        );
    this.root = posix.normalize(root).replace(/(.)\/$/, "$1");
    this.mountPaths = [...new Set(mounts.map((m) => posix.normalize(m).replace(/(.)\/$/, "$1")))].sort(
      (a, b) => b.length - a.length,
    );
    this.maxFileBytes = integerIn("maxFileBytes", options.maxFileBytes, 16 * 1024 * 1024, 0);
  }

  private local(path: string): string {
    return this.root + (path === "/" ? "" : path);
  }

  private async allowed(): Promise<string[]> {
    // The copies' real paths, read each time: a mount's copy is what the kubelet mounted there.
    const dirs = await Promise.all(
      this.mountPaths.map((m) => realpath(this.local(m)).catch(() => undefined)),
    );
    return dirs.filter((d): d is string => d !== undefined);
  }

  private underMount(p: string): boolean {
    return this.mountPaths.some((m) => under(p, m));
  }

  /**
   * `path` as the app's kernel resolves it, symlinks followed, an absolute link target taken
   * in the app's view (below the root here). Only the target's volumes are under the root,
   * so a path that leaves them is the image's: not served.
   */
  private async resolve(path: string): Promise<string> {
    const todo = path.split("/").filter(Boolean);
    let done = ""; // the resolved part, "" being "/"
    let links = 0;
    while (todo.length > 0) {
      const part = todo.shift()!;
      if (part === ".") continue;
      if (part === "..") {
        done = done.slice(0, done.lastIndexOf("/"));
        continue;
      }
      const next = `${done}/${part}`;
      const target = await readlink(this.root + next).catch((err: NodeJS.ErrnoException) => {
        if (err.code === "EINVAL") return undefined; // not a symlink
        // A symlink led out of the volumes, to a path the agent's filesystem does not have.
        if (err.code === "ENOENT" && links > 0 && !this.underMount(next))
          throw this.notServed(path, posix.join(next, ...todo));
        throw this.failure(path, err);
      });
      if (target === undefined) {
        done = next;
        continue;
      }
      if (++links > 40) throw this.failure(path, Object.assign(new Error("ELOOP"), { code: "ELOOP" }));
      todo.unshift(...target.split("/").filter(Boolean));
      if (target.startsWith("/")) done = "";
    }
    return done || "/";
  }

  private notServed(path: string, resolved?: string): FileAccessError {
    return new FileAccessError(
      ErrorCode.FILE_NOT_AVAILABLE,
      path,
      resolved === undefined
        ? `${path} is ${NOT_SERVED} (mounts: ${this.mountPaths.join(", ") || "none"})`
        : `${path} is a symlink to ${resolved}, which is ${NOT_SERVED}`,
    );
  }

  /** The real path in the agent of the file the app sees at `path`; it is inside a mount's copy. */
  private async locate(path: string): Promise<string> {
    // Normalized first: `..` in the request cannot climb out of a mount, it only names another path.
    const p = posix.normalize(`/${path}`).replace(/(.)\/$/, "$1");
    if (!this.underMount(p)) throw this.notServed(path);
    const resolved = await this.resolve(p);
    if (!this.underMount(resolved)) throw this.notServed(path, resolved);
    // The same path as the kernel sees it: links were resolved above, so only a link swapped in
    // meanwhile makes a difference, and it must still end inside a mount's copy.
    const real = await realpath(this.local(resolved)).catch((err: NodeJS.ErrnoException) => {
      throw this.failure(path, err);
    });
    if (!(await this.allowed()).some((dir) => under(real, dir))) throw this.notServed(path, real);
    return real;
  }

  private failure(path: string, err: NodeJS.ErrnoException): FileAccessError | Error {
    switch (err.code) {
      case "ENOENT":
        return new FileAccessError(ErrorCode.FILE_NOT_FOUND, path, `${path}: no such file or directory`);
      case "ENOTDIR":
        return new FileAccessError(
          ErrorCode.FILE_NOT_DIRECTORY,
          path,
          `${path}: a parent is not a directory`,
        );
      case "EISDIR":
        return new FileAccessError(ErrorCode.FILE_IS_DIRECTORY, path, `${path} is a directory`);
      case "EACCES":
      case "EPERM":
        return new FileAccessError(
          ErrorCode.FILE_NOT_AVAILABLE,
          path,
          `${path}: the agent (uid ${process.getuid?.() ?? "?"}) may not read it; the app runs as another user or group`,
        );
      case "ELOOP":
        return new FileAccessError(
          ErrorCode.FILE_NOT_AVAILABLE,
          path,
          `${path}: too many levels of symlinks`,
        );
      default:
        return err;
    }
  }

  mounts(): Promise<string[]> {
    return Promise.resolve([...this.mountPaths]);
  }

  async stat(path: string): Promise<FileStat> {
    const real = await this.locate(path);
    const s = await stat(real).catch((err: NodeJS.ErrnoException) => {
      throw this.failure(path, err);
    });
    return { type: s.isDirectory() ? "directory" : "file", size: s.size, mode: s.mode & 0o7777 };
  }

  async readDir(path: string): Promise<DirEntry[]> {
    const real = await this.locate(path);
    const entries = await readdir(real, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      throw this.failure(path, err);
    });
    const out = await Promise.all(
      entries.map(async (e): Promise<DirEntry> => {
        // A symlink (a ConfigMap key, `..data`) lists as what it leads to; a dangling one as a file.
        const dir = e.isSymbolicLink()
          ? await stat(posix.join(real, e.name)).then(
              (s) => s.isDirectory(),
              () => false,
            )
          : e.isDirectory();
        return { name: e.name, type: dir ? "directory" : "file" };
      }),
    );
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)); // byte order, locale-free
  }

  async readFile(path: string): Promise<Buffer> {
    const real = await this.locate(path);
    // O_NOFOLLOW and O_NONBLOCK: a symlink swapped in after the check is refused, and a
    // FIFO in a shared volume does not hang the open.
    const handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
      (err: NodeJS.ErrnoException) => {
        throw this.failure(path, err);
      },
    );
    try {
      await this.checkOpened(path, handle.fd);
      const s = await handle.stat();
      if (s.isDirectory())
        throw new FileAccessError(ErrorCode.FILE_IS_DIRECTORY, path, `${path} is a directory`);
      if (!s.isFile())
        throw new FileAccessError(ErrorCode.FILE_NOT_AVAILABLE, path, `${path} is not a regular file`);
      if (s.size > this.maxFileBytes)
        throw new FileAccessError(
          ErrorCode.FILE_NOT_AVAILABLE,
          path,
          `${path} has ${s.size} bytes; files over ${this.maxFileBytes} bytes are not served`,
        );
      // No more than the size checked: a file growing meanwhile is cut there.
      const data = Buffer.alloc(s.size);
      let n = 0;
      while (n < data.length) {
        const { bytesRead } = await handle.read(data, n, data.length - n, n);
        if (bytesRead === 0) break;
        n += bytesRead;
      }
      return data.subarray(0, n);
    } catch (err) {
      throw err instanceof FileAccessError ? err : this.failure(path, err as NodeJS.ErrnoException);
    } finally {
      await handle.close();
    }
  }

  /**
   * What was opened really is inside a mount's copy: a parent directory swapped for a symlink
   * between the check and the open would otherwise lead anywhere. Linux names an open file
   * in /proc/self/fd; elsewhere the check before the open is all there is.
   */
  private async checkOpened(path: string, fd: number): Promise<void> {
    const opened = await readlink(`/proc/self/fd/${fd}`).catch(() => undefined);
    if (opened === undefined) return;
    if (!(await this.allowed()).some((dir) => under(opened, dir)))
      throw new FileAccessError(
        ErrorCode.FILE_NOT_AVAILABLE,
        path,
        `${path} changed into a link out of the target's volumes while it was opened`,
      );
  }
}
