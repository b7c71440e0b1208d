// The FILE family for one session: read-only open/read/read-dir/stat/close over the
// target's files, and MOUNTS: the target's mount paths with the pod's /etc/resolv.conf (the
// agent's own: a sidecar shares the pod's DNS config; re-read on every request) (TargetView: the API-backed VolumeFiles, or a sidecar's PodFiles). An open
// reads the whole file once (API volume files are at most 1 MiB; PodFiles caps the size),
// so reads at any offset see one consistent version. Failures answer an errno-style name
// plus a message: ENOENT, ENOTSUP (not served remotely: image files, other volume kinds, no
// target pod, a file too large or not readable by the agent),
// EISDIR, ENOTDIR, EBADF, EROFS (writes), EMFILE (too many handles), EIO (API or I/O failure).
import { readFile } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { integerIn } from "../../../../lib/option-error.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { decodePayload, encodeFrame } from "../../../../proto/frame-codec.js";
import {
  FileCloseSchema,
  FileKind,
  FileMountsSchema,
  FileOpenSchema,
  FileReadDirSchema,
  FileReadSchema,
  FileResultSchema,
  FileStatSchema,
  FrameFamily,
} from "../../../../proto/gen/session_pb.js";
import { AgentError } from "../agent-errors.js";
import type { TargetView } from "./target-view.js";
import { FileAccessError } from "./volume-files.js";

export type FileResultInit = MessageInitShape<typeof FileResultSchema>;

export interface FileHandlesOptions {
  /** Open handles per session; default 256. */
  maxHandles?: number;
  /** Largest read answered in one frame, bytes; longer reads are cut (default 1 MiB − 4 KiB). */
  maxReadBytes?: number;
  /** The resolver config sent with MOUNTS (default /etc/resolv.conf); unreadable → "". */
  resolvConfPath?: string;
}

const ERRNO: Record<string, string> = {
  [ErrorCode.FILE_NOT_FOUND]: "ENOENT",
  [ErrorCode.FILE_NOT_AVAILABLE]: "ENOTSUP",
  [ErrorCode.FILE_IS_DIRECTORY]: "EISDIR",
  [ErrorCode.FILE_NOT_DIRECTORY]: "ENOTDIR",
  [ErrorCode.AGENT_NO_TARGET_POD]: "ENOTSUP",
};

export function fileError(err: unknown): FileResultInit {
  if (err instanceof FileAccessError || err instanceof AgentError) {
    return { error: ERRNO[err.code] ?? "EIO", message: err.message };
  }
  return {
    error: "EIO",
    message: `reading the target's files failed: ${(err as Error).message}`,
  };
}

export class FileHandles {
  private readonly handles = new Map<bigint, { path: string; data: Buffer }>();
  private next = 1n;
  private readonly maxHandles: number;
  private readonly maxReadBytes: number;
  private readonly resolvConfPath: string;

  constructor(
    private readonly view: TargetView,
    opts: FileHandlesOptions = {},
  ) {
    this.maxHandles = integerIn("maxHandles", opts.maxHandles, 256, 1);
    this.maxReadBytes = integerIn("maxReadBytes", opts.maxReadBytes, 1024 * 1024 - 4096, 1);
    this.resolvConfPath = opts.resolvConfPath ?? "/etc/resolv.conf";
  }

  get size(): number {
    return this.handles.size;
  }

  /** Answers one file request frame with a FileResult through `send`. */
  async answer(frame: Buffer, kind: number, requestId: number, send: (frame: Buffer) => void): Promise<void> {
    let result: FileResultInit;
    switch (kind) {
      case FileKind.OPEN: {
        const m = decodePayload(frame, FileOpenSchema);
        result = await this.open(m.path, m.write);
        break;
      }
      case FileKind.READ: {
        const m = decodePayload(frame, FileReadSchema);
        result = this.read(m.handle, m.offset, m.length);
        break;
      }
      case FileKind.READ_DIR:
        result = await this.readDir(decodePayload(frame, FileReadDirSchema).path);
        break;
      case FileKind.STAT:
        result = await this.stat(decodePayload(frame, FileStatSchema).path);
        break;
      case FileKind.MOUNTS:
        decodePayload(frame, FileMountsSchema);
        result = await this.mounts();
        break;
      default:
        result = this.close(decodePayload(frame, FileCloseSchema).handle);
    }
    send(
      encodeFrame({ family: FrameFamily.FILE, kind: FileKind.RESULT, requestId }, FileResultSchema, result),
    );
  }

  async open(path: string, write: boolean): Promise<FileResultInit> {
    if (write) return { error: "EROFS", message: `${path}: remote files are read-only` };
    if (this.handles.size >= this.maxHandles) {
      return {
        error: "EMFILE",
        message: `a session may hold ${this.maxHandles} open files; close some first`,
      };
    }
    try {
      const data = await (await this.view.volumeFiles()).readFile(path);
      const handle = this.next++;
      this.handles.set(handle, { path, data });
      return { result: { case: "handle", value: handle } };
    } catch (err) {
      return fileError(err);
    }
  }

  read(handle: bigint, offset: bigint, length: number): FileResultInit {
    const h = this.handles.get(handle);
    if (!h) return { error: "EBADF", message: `file handle ${handle} is not open` };
    const start = offset > BigInt(h.data.length) ? h.data.length : Number(offset);
    const n = Math.min(length, this.maxReadBytes);
    return { result: { case: "data", value: h.data.subarray(start, start + n) } };
  }

  close(handle: bigint): FileResultInit {
    if (!this.handles.delete(handle)) return { error: "EBADF", message: `file handle ${handle} is not open` };
    return { result: { case: "closed", value: true } };
  }

  async readDir(path: string): Promise<FileResultInit> {
    try {
      const entries = await (await this.view.volumeFiles()).readDir(path);
      return {
        result: {
          case: "entries",
          value: { entries: entries.map((e) => ({ name: e.name, isDir: e.type === "directory" })) },
        },
      };
    } catch (err) {
      return fileError(err);
    }
  }

  async stat(path: string): Promise<FileResultInit> {
    try {
      const s = await (await this.view.volumeFiles()).stat(path);
      return {
        result: {
          case: "stat",
          value: {
            size: BigInt(s.size),
            mode: s.mode | (s.type === "directory" ? 0o040000 : 0o100000),
            isDir: s.type === "directory",
          },
        },
      };
    } catch (err) {
      return fileError(err);
    }
  }

  async mounts(): Promise<FileResultInit> {
    try {
      const paths = await (await this.view.volumeFiles()).mounts();
      const resolvConf = await readFile(this.resolvConfPath, "utf8").catch(() => "");
      return { result: { case: "mounts", value: { paths, resolvConf } } };
    } catch (err) {
      return fileError(err);
    }
  }

  clear(): void {
    this.handles.clear();
  }
}
