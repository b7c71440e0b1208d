// The typed requests of a session, each one request and one reply: the Default cluster's
// environment, files and DNS, and the protocol ping every cluster answers (merged into
// one pong with per-cluster health). A failure the agent reports in the reply becomes a
// RemoteError naming what was asked.
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import * as pb from "../../../../proto/gen/session_pb.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { RemoteError } from "../cli-errors.js";

const F = pb.FrameFamily;

/** Sends a request and decodes its reply. */
export type Ask = <S extends DescMessage, R extends DescMessage>(
  family: number,
  kind: number,
  schema: S,
  init: MessageInitShape<S>,
  replySchema: R,
  connectionId?: number,
) => Promise<MessageShape<R>>;

export interface FileStatInfo {
  size: number;
  mode: number;
  modifiedUnixMs: number;
  isDir: boolean;
}

/** The target container's mount paths and the pod's resolver config (FILE MOUNTS). */
export interface TargetMounts {
  /** Volume mount paths the Default agent serves, longest first. */
  paths: string[];
  /** The pod's /etc/resolv.conf; "" when the agent could not read it. */
  resolvConf: string;
}

export interface EnvOptions {
  names?: string[];
  include?: string[];
  exclude?: string[];
  /**
   * Database branches: each variable's URL pointed at a branch by the Default agent
   * (database, user, password, host, port replaced). The password is sent, never logged.
   */
  branches?: EnvBranchRewrite[];
  /**
   * SQS queue splits: each variable naming a split queue set to the session's output queue
   * by the Default agent (`Session.queueRewrites()`).
   */
  queues?: EnvQueueRewrite[];
}

/** One variable pointed at a database branch: the EnvGet's BranchRewrite message. */
export type EnvBranchRewrite = Omit<pb.BranchRewrite, "$typeName" | "$unknown">;

/** One variable pointed at a queue split's output queue: the EnvGet's QueueRewrite message. */
export type EnvQueueRewrite = Omit<pb.QueueRewrite, "$typeName" | "$unknown">;

export interface ClusterHealthInfo {
  cluster: string;
  state: "ok" | "down" | "timeout" | "unknown";
  rttMs: number;
  error: string;
}

export interface PingResult {
  rttMs: number;
  clusters: ClusterHealthInfo[];
}

/** Not a wire code: the agent's EnvResult carries only an error text. */
const ENV_FAILED = "SWITCHYARD_ENV_FAILED";
/** The errno-style code of a file answer that lacks what was asked for. */
const EIO = "EIO";

export class SessionRequests {
  constructor(private readonly ask: Ask) {}

  /** The Default cluster's environment of the target (include/exclude are shell-style patterns). */
  async env(opts: EnvOptions = {}): Promise<Record<string, string>> {
    const r = await this.ask(
      F.ENV,
      pb.EnvKind.GET,
      pb.EnvGetSchema,
      {
        names: opts.names ?? [],
        include: opts.include ?? [],
        exclude: opts.exclude ?? [],
        branches: opts.branches ?? [],
        queues: opts.queues ?? [],
      },
      pb.EnvResultSchema,
    );
    if (r.error) throw new RemoteError(ENV_FAILED, `reading the target's environment failed: ${r.error}`);
    return { ...r.vars };
  }

  async #file(kind: number, schema: DescMessage, init: object, what: string): Promise<pb.FileResult> {
    const r = await this.ask(
      F.FILE,
      kind,
      schema,
      init as MessageInitShape<DescMessage>,
      pb.FileResultSchema,
    );
    if (r.error) throw new RemoteError(r.error, `${what}: ${r.error}${r.message ? ` (${r.message})` : ""}`);
    return r;
  }

  /** Opens a remote file read-only; returns its handle. */
  async openFile(path: string): Promise<bigint> {
    const r = await this.#file(pb.FileKind.OPEN, pb.FileOpenSchema, { path }, `cannot open ${path}`);
    if (r.result.case !== "handle") throw new RemoteError(EIO, `open ${path}: the agent returned no handle`);
    return r.result.value;
  }

  async readFile(handle: bigint, offset: number, length: number): Promise<Buffer> {
    const r = await this.#file(
      pb.FileKind.READ,
      pb.FileReadSchema,
      { handle, offset: BigInt(offset), length },
      `cannot read handle ${handle}`,
    );
    return r.result.case === "data" ? Buffer.from(r.result.value) : Buffer.alloc(0);
  }

  async closeFile(handle: bigint): Promise<void> {
    await this.#file(pb.FileKind.CLOSE, pb.FileCloseSchema, { handle }, `cannot close handle ${handle}`);
  }

  async stat(path: string): Promise<FileStatInfo> {
    const r = await this.#file(pb.FileKind.STAT, pb.FileStatSchema, { path }, `cannot stat ${path}`);
    if (r.result.case !== "stat") throw new RemoteError(EIO, `stat ${path}: the agent returned no stat`);
    const s = r.result.value;
    return { size: Number(s.size), mode: s.mode, modifiedUnixMs: Number(s.modifiedUnixMs), isDir: s.isDir };
  }

  async readDir(path: string): Promise<Array<{ name: string; isDir: boolean }>> {
    const r = await this.#file(pb.FileKind.READ_DIR, pb.FileReadDirSchema, { path }, `cannot list ${path}`);
    if (r.result.case !== "entries") return [];
    return r.result.value.entries.map((e) => ({ name: e.name, isDir: e.isDir }));
  }

  async mounts(): Promise<TargetMounts> {
    const r = await this.#file(
      pb.FileKind.MOUNTS,
      pb.FileMountsSchema,
      {},
      "cannot list the target's mounts",
    );
    if (r.result.case !== "mounts") throw new RemoteError(EIO, "mounts: the agent returned no mount list");
    return { paths: [...r.result.value.paths], resolvConf: r.result.value.resolvConf };
  }

  /** Reads a whole remote file (open, read until a short read, close). */
  async readWholeFile(path: string, chunkBytes = 256 * 1024): Promise<Buffer> {
    const handle = await this.openFile(path);
    const parts: Buffer[] = [];
    try {
      for (let offset = 0; ;) {
        const chunk = await this.readFile(handle, offset, chunkBytes);
        if (chunk.length > 0) parts.push(chunk);
        offset += chunk.length;
        if (chunk.length < chunkBytes) break;
      }
    } finally {
      await this.closeFile(handle).catch(() => {});
    }
    return Buffer.concat(parts);
  }

  /** Resolves a host name with the Default cluster's resolver. */
  async lookup(host: string, ipFamily: 0 | 4 | 6 = 0): Promise<Array<{ address: string; family: number }>> {
    const r = await this.ask(
      F.DNS,
      pb.DnsKind.GETADDRINFO,
      pb.DnsGetAddrInfoSchema,
      { host, ipFamily },
      pb.DnsResultSchema,
    );
    if (r.error) throw new RemoteError(r.error, `cannot resolve ${host}: ${r.error}`);
    return r.addresses.map((a) => ({ address: a.address, family: a.ipFamily }));
  }

  async reverse(address: string): Promise<string[]> {
    const r = await this.ask(F.DNS, pb.DnsKind.REVERSE, pb.DnsReverseSchema, { address }, pb.DnsResultSchema);
    if (r.error) throw new RemoteError(r.error, `cannot reverse-resolve ${address}: ${r.error}`);
    return r.hostnames;
  }

  /** Protocol ping to every cluster; the merged pong's per-cluster health. */
  async ping(): Promise<PingResult> {
    const started = process.hrtime.bigint();
    const pong = await this.ask(
      F.PING,
      pb.PingKind.PING,
      pb.PingSchema,
      { sentAtMicros: BigInt(Date.now()) * 1000n },
      pb.PongSchema,
    );
    const rttMs = Number(process.hrtime.bigint() - started) / 1e6;
    const clusters = pong.clusters.map((c) => ({
      cluster: c.cluster,
      state: stateName(c.state),
      rttMs: c.rttMicros / 1000,
      error: c.error,
    }));
    return { rttMs, clusters };
  }

  /** Opens outgoing stream `id` to host:port on the Default cluster; rejects when the agent refuses. */
  async connectStream(
    family: typeof F.OUTGOING_TCP | typeof F.OUTGOING_UDP,
    id: number,
    host: string,
    port: number,
  ): Promise<void> {
    const tcp = family === F.OUTGOING_TCP;
    const r = await this.ask(
      family,
      pb.OutgoingKind.CONNECT,
      tcp ? pb.TcpConnectSchema : pb.UdpBindSchema,
      { host, port },
      pb.ConnectResultSchema,
      id,
    );
    if (r.error)
      throw new RemoteError(
        ErrorCode.CONNECT_FAILED,
        `${tcp ? "cannot connect to" : "cannot bind UDP to"} ${host}:${port}: ${r.error}`,
      );
  }
}

function stateName(s: pb.HealthState): ClusterHealthInfo["state"] {
  if (s === pb.HealthState.OK) return "ok";
  if (s === pb.HealthState.DOWN) return "down";
  if (s === pb.HealthState.TIMEOUT) return "timeout";
  return "unknown";
}
